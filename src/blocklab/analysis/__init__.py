"""Statistics and verdicts."""
