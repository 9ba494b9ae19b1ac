"""Planning evaluation on TaskBench-format data: `python -m hugginggpt.eval --help`.

data (loading both gold layouts), mapping (TaskBench tool names <-> task types), convert (our plan
in TaskBench's node form), metrics (TaskBench's and the HuggingGPT paper's), harness (predictions
as JSON Lines, resumable), score, report (markdown, charts, runs compared).
"""
