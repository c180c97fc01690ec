"""Analysis: from stored samples to per-stage figures, comparisons against the control, and verdicts."""
