"""What a model costs before it runs (estimate) and the user's limits on what a
request may use (limits)."""
