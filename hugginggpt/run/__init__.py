"""One request's run and its machinery: the pipeline (the public face), the request run
(its stages in order), the one task graph that schedules every plan, streamed or given, its events
and records, the trace (written by trace, read back by traces), seeds, the result cache, the journal
and resume. Imports stages/ and what
they import; never commands/."""
