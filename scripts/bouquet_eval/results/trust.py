"""The report page "Which metric to trust": correlations.csv read for decisions.

Per direction, with its languages' names, scripts and regions: the metric that agrees best
with people (by `metaeval.decide_by`), by how much it leads the next one, whether it is
significantly better than every other metric after correction, and the learned metrics whose
model never saw its languages; and where the leaderboard's headline metric disagrees with
people. Above, each metric's pooled agreement, and every metric's agreement inside and outside
each learned metric's training languages (correlations.csv's `training` scopes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bouquet_eval.results.aggregate import english_groups
from bouquet_eval.results.leaderboard import primary_metric
from bouquet_eval.results.rendering import interactive_page
from bouquet_eval.results.views import describe_language

STATISTIC_NAMES = {
    "acc_eq": "acc-eq",
    "kendall": "Kendall tau-b",
    "spearman": "Spearman",
    "pearson": "Pearson",
}
HEADLINE_STATES = {
    "best": "agrees best",
    "tied": "not significantly worse than the best",
    "worse": "significantly worse than the best",
    "none": "no significant agreement",
}


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else round(float(value), 4)


def headline_state(rows: pd.DataFrame, headline: str) -> str:
    """How the headline metric fares in one scope: best, tied with the best, significantly
    worse, or without significant agreement (Kendall's interval reaching 0)."""
    mine = rows[rows["metric"] == headline]
    if mine.empty:
        return "none"
    record = mine.iloc[0]
    if not (record["kendall_low"] > 0):
        return "none"
    if bool(record["best"]):
        return "best"
    return "worse" if bool(record["best_significantly_better"]) else "tied"


def _flag(value: Any) -> bool | None:
    """A boolean of correlations.csv as read back (True, False, or missing)."""
    if isinstance(value, bool):
        return value
    return None if value is None or pd.isna(value) else str(value) == "True"


POOL_LABELS = {
    "all": "all directions",
    "into_english": "into English",
    "out_of_english": "out of English",
    "without_english": "between two other languages",
    "inside": "inside the training languages of {}",
    "outside": "outside the training languages of {}",
}


def _pools(frame: pd.DataFrame, decide_by: str, metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Each pool (every direction, into and out of English, between two other languages, inside
    and outside each learned metric's training languages): how many directions and segments,
    and every metric's agreement there, the best marked."""
    directions = frame[frame["scope"] == "direction"].drop_duplicates("name")
    per_direction = frame[frame["scope"] == "direction"]
    counts = {
        "all": len(directions),
        **{name: int(rows.sum()) for name, rows in english_groups(directions).items()},
    }
    found = []
    pools = frame[frame["scope"].isin(["pooled", "training"])]
    for name, rows in pools.groupby("name", sort=False):
        where, _, columns = str(name).partition(":")
        label = POOL_LABELS[where].format(columns.replace(",", ", "))
        if columns:
            flags = per_direction[per_direction["metric"] == columns.split(",")[0]]
            seen = flags["trained_on_languages"].map(_flag)
            counts[str(name)] = int((seen == (where == "inside")).sum())
        values = {
            str(record["metric"]): {
                "value": _number(record[decide_by]),
                "low": _number(record[f"{decide_by}_low"]),
                "high": _number(record[f"{decide_by}_high"]),
                "kendall": _number(record["kendall"]),
                "system_accuracy": _number(record["system_accuracy"]),
                "best": bool(record["best"]),
            }
            for record in rows.to_dict(orient="records")
        }
        found.append(
            {
                "pool": label,
                "training": bool(columns),
                "directions": counts[str(name)],
                "segments": int(rows["n_segments"].max()),
                "values": [values.get(metric) for metric in metrics],
            }
        )
    return found


def trust_data(frame: pd.DataFrame, decide_by: str, significance: float) -> dict[str, Any]:
    """What the page draws, from correlations.csv."""
    if "trained_on_languages" not in frame:
        frame = frame.assign(trained_on_languages=pd.NA)
    frame = frame.assign(best_significantly_better=frame["best_significantly_better"].map(_flag))
    metrics = list(dict.fromkeys(frame["metric"]))
    headline = primary_metric(metrics)
    directions = []
    languages: dict[str, Any] = {}
    for name, rows in frame[frame["scope"] == "direction"].groupby("name", sort=True):
        ranked = rows.sort_values(decide_by, ascending=False, na_position="last")
        best, second = ranked.iloc[0], ranked.iloc[1] if len(ranked) > 1 else None
        others = rows[~rows["best"].astype(bool)]
        significant = bool(len(others)) and bool(others["best_significantly_better"].all())
        source, target = str(name).split("-")
        for code in (source, target):
            if code not in languages:
                languages[code] = describe_language(code)
        margin = None if second is None else _number(best[decide_by] - second[decide_by])
        unseen = [
            m
            for m, flag in zip(rows["metric"], rows["trained_on_languages"], strict=True)
            if _flag(flag) is False
        ]
        directions.append(
            {
                "direction": name,
                "source": languages[source].name,
                "source_script": languages[source].script,
                "source_region": languages[source].region,
                "target": languages[target].name,
                "target_script": languages[target].script,
                "target_region": languages[target].region,
                "segments": int(best["n_segments"]),
                "systems": int(best["n_systems"]),
                "best": best["metric"] if not math.isnan(best[decide_by]) else None,
                "value": _number(best[decide_by]),
                "low": _number(best[f"{decide_by}_low"]),
                "high": _number(best[f"{decide_by}_high"]),
                "runner_up": None if second is None else second["metric"],
                "margin": margin,
                "significant": significant if len(others) else None,
                "headline": HEADLINE_STATES[headline_state(rows, headline)],
                "unseen_by": ", ".join(unseen),
            }
        )
    return {
        "statistic": STATISTIC_NAMES[decide_by],
        "headline": headline,
        "significance": significance,
        "metrics": metrics,
        "pools": _pools(frame, decide_by, metrics),
        "directions": directions,
        "disagreeing": sum(
            d["headline"] in (HEADLINE_STATES["worse"], HEADLINE_STATES["none"]) for d in directions
        ),
    }


def trust_page(data: Mapping[str, Any]) -> str:
    return interactive_page(
        "trust.html", "Which metric to trust", dict(data), "trust.js", styles=("trust.css",)
    )


def agreement_notes(frame: pd.DataFrame, decide_by: str) -> Sequence[str]:
    """One line per metric for the leaderboard: its agreement pooled over every judged
    direction."""
    pooled = frame[(frame["scope"] == "pooled") & (frame["name"] == "all")]
    name = STATISTIC_NAMES[decide_by]
    return [
        f"{record['metric']}: {name} {record[decide_by]:.3f} "
        f"[{record[f'{decide_by}_low']:.3f}, {record[f'{decide_by}_high']:.3f}] with human "
        f"judgements over {int(record['n_segments'])} judged translations"
        for record in pooled.to_dict(orient="records")
    ]
