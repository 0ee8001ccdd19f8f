"""Scoring translated directions with the metrics."""
