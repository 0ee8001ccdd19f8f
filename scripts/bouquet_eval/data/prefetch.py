"""Fetch everything a run needs from the Hugging Face Hub into the local cache, and no more.

Run once on a machine with network access (`snakemake ... prefetch`); the same run can then go
on without network, with HF_HUB_OFFLINE=1 (compute nodes). Local paths are left alone, so the
same configuration works on both sides. What a run needs, each part worked out by its owner
and passed here:

- the dataset's parquet files of the configured config and split, at `dataset.revision`;
- each model whose translator loads hub weights (`Backend.hub_model`: vllm, nllb, madlad,
  aya): config, tokenizer and weights at its `revision`, and for vllm the tokenizer
  `engine_args.tokenizer` names, as the plan derives them (`ModelPlan.hub_needs` in
  `bouquet_eval.planning.plan`);
- each metric's models, as its record says (`MetricSet.hub_needs` in
  `bouquet_eval.metrics.records`: for MetricX `metricx.model`'s config and weights and only
  the tokenizer files of `metricx.tokenizer`; for GlotLID the one file `glotlid.model` names).

Which files of a repository each part takes is `bouquet_eval.data.hub.select_files`. Before any job
starts, the workflow checks that what its jobs will load is cached or can be had from the Hub
(`check_hub_needs`), from the same list.
"""

from __future__ import annotations

from collections.abc import Sequence

from bouquet_eval.core.home import fetch_hint
from bouquet_eval.data.dataset import DatasetSource
from bouquet_eval.data.hub import HubFiles, check_reachable, fetch


def prefetch(dataset: DatasetSource, needs: Sequence[HubFiles]) -> list[str]:
    """Download what a run `needs` (its models', then its metrics') and the cache lacks; one
    line per repository saying what it holds, at which commit. The `dataset` was resolved by
    the plan, whose main process fetched it."""
    return [f"dataset: {dataset.root} ({dataset.identity})", *fetch_all(needs)]


def fetch_all(needs: Sequence[HubFiles]) -> list[str]:
    """Fetch `needs` the cache lacks; one line per repository saying what it holds, at which
    commit."""
    lines = []
    for need in needs:
        fetched = fetch(need)
        lines.append(
            f"{need.needed_by}: {need.name} at {fetched.commit}: {', '.join(fetched.files)}"
        )
    return lines


def check_hub_needs(needs: Sequence[HubFiles], hint: str | None = None) -> None:
    """Before any job starts: HubError naming the first model or tokenizer of `needs` (what
    the jobs to run would load) that is neither cached nor to be had from the Hub, with how
    to fetch it."""
    for need in needs:
        check_reachable(need, hint or f"{fetch_hint()}. No job was started.")
