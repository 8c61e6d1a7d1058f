"""Sending a run's results elsewhere: OTLP traces (docs/otlp.md)."""
