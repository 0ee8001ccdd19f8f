"""How many CPUs a job asks for when the configuration (`resources.<family>.cpus`, a model's
own `resources`) does not say: what the job's work keeps busy, so that a local `--cores N` run
overlaps the jobs that need little, and a cluster gives each job what it uses.

Translate jobs follow their translator (`Backend.cpus`), score jobs their metrics: the
sacreBLEU metrics and GlotLID score on one thread; MetricX computes on the CPU when its device
is `cpu`, and otherwise tokenizes and batches for the GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

METRIC_CPUS = {"chrf": 1, "bleu": 1, "ter": 1, "glotlid": 1}
METRICX_CPUS = {"cpu": 4, "gpu": 2}
CUSTOM_METRIC_CPUS = 2
"""A metric of one's own: as many as score jobs asked for before they followed the metrics."""
AGGREGATE_CPUS = 1


def score_cpus(config: Mapping[str, Any]) -> int:
    def cpus(metric: str) -> int:
        if metric == "metricx":
            return METRICX_CPUS["cpu" if config["metricx"]["device"] == "cpu" else "gpu"]
        return METRIC_CPUS.get(metric, CUSTOM_METRIC_CPUS)

    return max(cpus(metric) for metric in config["metrics"])


def default_cpus(stage: str, config: Mapping[str, Any]) -> int:
    """CPUs of a score or aggregate job; a translate job's are its model's
    (`translators.backends.model_cpus`, in the plan)."""
    if stage == "score":
        return score_cpus(config)
    return AGGREGATE_CPUS
