"""Telemetry: preallocated channels (log), run folders (run), metrics, gates and plots."""
