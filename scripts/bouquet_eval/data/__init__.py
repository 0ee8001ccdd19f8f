"""The benchmark's sentences and the per-direction files: the dataset, the Hub, outputs."""
