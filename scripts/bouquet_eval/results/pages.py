"""The report's two pages without a script: the leaderboard and the run's configuration."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from bouquet_eval.metrics.records import RECORDS
from bouquet_eval.results.aggregate import ENGLISH_GROUPS
from bouquet_eval.results.figures import better, forest_plot
from bouquet_eval.results.leaderboard import (
    MISSING,
    SIGNIFICANCE_LEVEL,
    best_mark,
    display_scales,
    format_score,
    metric_columns_of,
    unseen_notes,
)
from bouquet_eval.results.rendering import ABRIDGED_CHARACTERS, PAGE_BYTES, abridged, render

if TYPE_CHECKING:
    from markupsafe import Markup


def integer(value: Any) -> str:
    """A count or a rank as an integer whatever the column's type (a float where some rows have
    none); the missing mark where it has none."""
    return MISSING if value is None or pd.isna(value) else str(int(value))


def inline_svg(svg: str) -> Markup:
    """A figure of ours as an svg element of a page: taken as it is, since `svgplot` escapes
    every text it writes."""
    from markupsafe import Markup

    return Markup(svg)


def leaderboard_page(board: pd.DataFrame, lower: set[str]) -> str:
    """The leaderboard as an HTML table (mean and interval per metric) and a forest plot."""
    primary = board.attrs["primary"]
    targets = board.attrs.get("targets", {})
    metrics = metric_columns_of(board)
    scale = display_scales(board)
    head = ["rank", "model", "cluster", "p vs best", "directions", "sentences"]
    head += [f"{c} {best_mark(c, lower, targets)}" for c in metrics]
    # The metric is named in the notes: the headers stay narrow.
    head += [g.replace("_", " ").replace("english", "English") for g in ENGLISH_GROUPS]
    rows = []
    for record in board.to_dict(orient="records"):
        ranked = not pd.isna(record["rank"])
        bound = record.get("bound") or ""
        p_value = record["p_vs_best"]
        rows.append(
            {
                "css": f"cluster-{integer(record['cluster'])}" if ranked else "unranked",
                "rank": f"{bound} bound" if bound else integer(record["rank"]),
                "model": record["model"],
                "counts": [
                    integer(record["cluster"]),
                    MISSING if pd.isna(p_value) else f"{p_value:.3g}",
                    integer(record["n_directions"]),
                    integer(record["n_sentences"]),
                ],
                "scores": [
                    [
                        format_score(record[column], scale[column]),
                        format_score(record[f"{column}_ci_low"], scale[column]),
                        format_score(record[f"{column}_ci_high"], scale[column]),
                    ]
                    for column in metrics
                ],
                "groups": [
                    format_score(record[f"{primary}_{group}"], scale[primary])
                    for group in ENGLISH_GROUPS
                ],
            }
        )
    notes = [f"{r['model']}: {r['note']}" for r in board.to_dict(orient="records") if r["note"]]
    # Each metric's pooled agreement with human judgements, where they were evaluated.
    notes += [f"Agreement with people: {note}" for note in board.attrs.get("agreement", ())]
    notes += unseen_notes(board)
    return render(
        "leaderboard.html",
        "Leaderboard",
        head=head,
        rows=rows,
        missing=MISSING,
        primary=primary,
        better=better(primary, lower, targets),
        significance=SIGNIFICANCE_LEVEL,
        notes=notes,
        forest=inline_svg(forest_plot(board, lower)),
    )


def dataset_in_use(dataset: Mapping[str, Any]) -> dict[str, Any]:
    """The `dataset` settings the run used: a local `path` replaces the Hub's name, config,
    split and revision, which the configuration still holds as defaults but nothing read."""
    if dataset.get("path"):
        return {"path": dataset["path"]}
    return {key: value for key, value in dataset.items() if key != "path"}


def configuration_in_use(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration as the run used it: the dataset settings it read (`dataset_in_use`),
    and of the metrics' sections (which validation fills with defaults for every built-in
    metric) only those of the metrics it computed."""
    used = set(config.get("metrics") or ())
    return {
        key: dataset_in_use(value or {}) if key == "dataset" else value
        for key, value in config.items()
        if key not in RECORDS or key in used
    }


SAME_CONFIGURATION = "(the configuration above, with this model's entry alone in models)"


def run_page(config: Mapping[str, Any], manifests: Mapping[str, dict[str, Any]]) -> str:
    """The configuration of the run and each model's latest manifest entry, in full: an
    entry's configuration (the run's, with the model's entry alone in `models`) is not shown
    again where it is the configuration the page shows above. A page
    that would be too large for report.html (`PAGE_BYTES`: configuration strings of hundreds
    of kilobytes) shows each string `abridged`, and says so."""
    latest = {}
    for name, manifest in manifests.items():
        entries = manifest.get("entries", [])
        entry = dict(entries[-1]) if entries else {}
        own = [model for model in config.get("models") or () if model.get("name") == name]
        # As the manifest holds it: JSON.
        if entry.get("config") == json.loads(json.dumps({**config, "models": own})):
            entry["config"] = SAME_CONFIGURATION
        latest[name] = (len(entries), entry)
    page = _run_page(configuration_in_use(config), latest, abridged=False)
    if len(page.encode("utf-8")) <= PAGE_BYTES:
        return page
    return _run_page(abridged(configuration_in_use(config)), abridged(latest), abridged=True)


def _run_page(configuration: Any, latest: Mapping[str, Any], abridged: bool) -> str:
    import yaml

    sections = [
        {
            "model": name,
            "entries": count,
            "created": str(entry.get("created")),
            "command": " ".join(entry.get("command") or []),
            "usage": usage_line(entry.get("timing") or {}),
            "latest": json.dumps(entry, indent=2, ensure_ascii=False),
        }
        for name, (count, entry) in latest.items()
    ]
    return render(
        "run.html",
        "Run configuration and manifests",
        # Each setting on one line, however long: as it was written.
        configuration=yaml.safe_dump(
            configuration, sort_keys=False, allow_unicode=True, width=math.inf
        ),
        manifests=sections,
        abridged=ABRIDGED_CHARACTERS if abridged else None,
    )


def usage_line(timing: Mapping[str, Any]) -> str:
    """The tokens a model's translations took, and their cost where prices are given."""
    names = {
        "prompt_tokens": "prompt tokens",
        "completion_tokens": "completion tokens",
        "reasoning_tokens": "of which reasoning",
        "cost": "cost",
    }
    return "; ".join(f"{label} {timing[key]:,.6g}" for key, label in names.items() if key in timing)
