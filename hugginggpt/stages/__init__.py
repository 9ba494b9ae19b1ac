"""The four stages of a request: plan (planner, plan, plan_schema, plan_stream, and
planfile for plans a person gives or edits), select
(selection, choice), execute (one task on an endpoint) and respond. Each yields events and returns its
result; none knows who listens. Imports the vocabulary (hugginggpt.tasks, config, text), files/,
llms/, costs/, catalog/, endpoints/ and run.events; never run/'s machinery or commands/."""
