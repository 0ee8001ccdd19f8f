"""How many CPUs a job asks for when the configuration (`resources.<family>.cpus`, a model's
own `resources`) does not say: what the job's work keeps busy, so that a local `--cores N` run
overlaps the jobs that need little, and a cluster gives each job what it uses.

Translate jobs follow their translator (`Backend.cpus`), score jobs the metrics they compute
(`MetricRecord.job_cpus`: the sacreBLEU metrics and GlotLID score on one thread; MetricX
computes on the CPU when its device is `cpu`, and otherwise tokenizes and batches for the GPU).
"""

from __future__ import annotations

from bouquet_eval.metrics.records import MetricSet

AGGREGATE_CPUS = 1


def score_cpus(metrics: MetricSet, family: str | None = None) -> int:
    """CPUs of the score jobs of one family of the run's metrics (`MetricSet.families`); of a
    job that computes every metric when `family` is None (verification)."""
    families = [family] if family is not None else list(metrics.families())
    return max(metrics.family_cpus(name) for name in families)


def default_cpus(stage: str, metrics: MetricSet, family: str | None = None) -> int:
    """CPUs of a score or aggregate job, the metrics' `family` for score jobs (`metrics`: the
    run's, as the workflow built them once); a translate job's are its model's
    (`translators.backends.model_cpus`, in the plan)."""
    if stage == "score":
        return score_cpus(metrics, family)
    return AGGREGATE_CPUS
