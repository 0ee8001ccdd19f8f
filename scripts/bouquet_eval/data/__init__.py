"""The benchmark's sentences and the per-direction files: the dataset, the Hub, outputs, and
received submissions (read as data only)."""
