"""Fetch everything a run needs from the Hugging Face Hub into the local cache, and no more.

Run once on a machine with network access (`snakemake ... prefetch`); the same run can then go
on without network, with HF_HUB_OFFLINE=1 (compute nodes). Local paths are left alone, so the
same configuration works on both sides. What a configuration needs (`hub_needs`):

- the dataset's parquet files of the configured config and split, at `dataset.revision`;
- each model whose translator loads hub weights (vllm, nllb, madlad, aya): config, tokenizer
  and weights at its `revision`, and for vllm the tokenizer `engine_args.tokenizer` names;
- MetricX: `metricx.model`'s config and weights, and only the tokenizer files of
  `metricx.tokenizer` (mT5's repository also holds its weights, in three formats);
- GlotLID: the one model file `glotlid.model` names, at `glotlid.revision`.

Which files of a repository each part takes is `bouquet_eval.data.hub.select_files`. Before any job
starts, the workflow checks that what its jobs will load is cached or can be had from the Hub
(`check_hub_needs`), from the same list.
"""

from __future__ import annotations

from collections.abc import Container
from pathlib import Path
from typing import Any

from bouquet_eval.core.home import fetch_hint
from bouquet_eval.data.dataset import DatasetSource
from bouquet_eval.data.hub import PARTS, HubFiles, check_reachable, fetch

# Translators that load a model by hub id, with `model` and `revision` settings.
HUB_TRANSLATORS = ("vllm", "nllb", "madlad", "aya")


def is_local(path: str) -> bool:
    """A path that exists is read from disk; anything else is a hub id."""
    return Path(path).expanduser().exists()


def hub_needs(
    config: dict[str, Any], translating: Container[str] | None = None, scoring: bool = True
) -> list[HubFiles]:
    """What the models and metrics of a validated configuration need from the hub: of the
    models named in `translating` (all by default), and of the metrics when `scoring`."""
    needs: list[HubFiles] = []
    for model in config["models"]:
        if model["translator"] not in HUB_TRANSLATORS:
            continue
        if translating is not None and model["name"] not in translating:
            continue
        user = f"model '{model['name']}'"
        if not is_local(model["model"]):
            needs.append(HubFiles(model["model"], model.get("revision"), user, parts=PARTS))
        engine_args = model.get("engine_args") or {}
        tokenizer = engine_args.get("tokenizer")
        if tokenizer and not is_local(tokenizer):
            revision = engine_args.get("tokenizer_revision")
            needs.append(
                HubFiles(tokenizer, revision, f"{user} engine_args.tokenizer", parts=("tokenizer",))
            )
    metrics = config["metrics"] if scoring else []
    if "metricx" in metrics:
        for key, parts in (("model", ("config", "weights")), ("tokenizer", ("tokenizer",))):
            spec = config["metricx"][key]
            if not is_local(spec):
                needs.append(HubFiles(spec, None, f"metricx.{key}", parts=parts))
    if "glotlid" in metrics and not is_local(config["glotlid"]["model"]):
        owner, repository, filename = config["glotlid"]["model"].split("/", 2)
        revision = config["glotlid"]["revision"]
        needs.append(
            HubFiles(f"{owner}/{repository}", revision, "glotlid.model", filename=filename)
        )
    return needs


def prefetch(config: dict[str, Any], dataset: DatasetSource) -> list[str]:
    """Download what a validated configuration needs and the cache lacks; one line per
    repository saying what it holds, at which commit. The `dataset` was resolved by the plan,
    whose main process fetched it."""
    lines = [f"dataset: {dataset.root} ({dataset.identity})"]
    for need in hub_needs(config):
        fetched = fetch(need)
        lines.append(
            f"{need.needed_by}: {need.name} at {fetched.commit}: {', '.join(fetched.files)}"
        )
    return lines


def check_hub_needs(
    config: dict[str, Any], translating: Container[str], scoring: bool, hint: str | None = None
) -> None:
    """Before any job starts: HubError naming the first model or tokenizer that the jobs to
    run (translate jobs of the models in `translating`; score jobs when `scoring`) would load
    and that is neither cached nor to be had from the Hub, with how to fetch it."""
    for need in hub_needs(config, translating, scoring):
        check_reachable(need, hint or f"{fetch_hint()}. No job was started.")
