"""The command line: `python -m hugginggpt` (cli), `replay`, `resume`, what they
share (terminal), a run as progress lines, the terminal's review loop. The top of the package:
nothing else in it imports commands/ (the OpenAI-compatible door reuses its progress lines)."""
