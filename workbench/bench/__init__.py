"""Benchmarks that print figures (speed targets live here, not in timed tests)."""
