"""Watching a run without owning it: observers over one event stream, the
Prometheus metrics, OpenTelemetry traces (run_spans builds a run's spans), tokens and cost (usage).
Imports run.events and the vocabulary; nothing imports it to steer a run."""
