"""The judged translations in MT Metrics Eval's layout, human scores included: test set
`metbouquet`, so that MTME's own code computes the agreement correlations.csv reports.

Each judged direction is a language pair; its segments are the judged source segments (sorted
by segment id), each a document of its own; `refA` is the table's reference; each judged
system is a system named by its folder name (`data.judgements.judged_systems`: the table's
names are data, and never name a file), the names it stands for recorded in `systems.csv`
(columns `system`, the name in MTME's files, and `name`, the table's). Human scores go to
`human-scores/<lp>.human.{seg,sys}.score`, oriented so that higher is better, `None` where a
system's segment was not judged; MTME leaves those cells out of its correlations. Metric
scores are oriented the same way (MetricX negated, as MTME stores it) and, as MTME wants a
number in every cell, hold the system's mean score where the segment was not judged: no
correlation reads them. A system-level score is the mean over the system's judged segments.
A metric without a score for some judged translation is left out of its language pair.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from bouquet_eval.core.io import write_atomically
from bouquet_eval.results.mtme import REFERENCE, escape, metric_name, write_lines

TEST_SET = "metbouquet"
HUMAN = "human"
SYSTEMS = "systems.csv"


def _name(value: object) -> str:
    """A segment's name without whitespace or dots, which separate the fields of MTME's
    files."""
    return re.sub(r"[\s.]+", "_", str(value)) or "_"


def _score(value: float) -> str:
    return "None" if math.isnan(value) else repr(float(value))


def export_judgements(
    root: Path,
    table: pd.DataFrame,
    scores: Mapping[str, np.ndarray],
    reference_free: set[str],
    systems: Mapping[str, str],
) -> dict[str, list[str]]:
    """Write `root` (…/mtme/metbouquet), each judged system under its folder name in
    `systems` (name -> folder name); per language pair, the metrics left out."""
    left_out: dict[str, list[str]] = {}
    frame = table.assign(**{f"metric:{c}": v for c, v in scores.items()})
    named = pd.DataFrame({"system": list(systems.values()), "name": list(systems)})
    write_atomically(root / SYSTEMS, lambda temporary: named.to_csv(temporary, index=False))
    for (src, tgt), part in frame.groupby(["src_lang", "tgt_lang"], sort=True):
        lp = f"{src}-{tgt}"
        segments = part.drop_duplicates("segment").sort_values("segment").set_index("segment")
        order = segments.index.tolist()
        write_lines(root / "sources" / f"{lp}.txt", [escape(t) for t in segments["src_text"]])
        write_lines(root / "documents" / f"{lp}.docs", [f"{TEST_SET} {_name(s)}" for s in order])
        write_lines(
            root / "references" / f"{lp}.{REFERENCE}.txt",
            [escape(t) for t in segments["ref_text"]],
        )
        cells = {
            systems[system]: rows.set_index("segment").reindex(order)
            for system, rows in part.groupby("system", sort=True)
        }
        for system, rows in cells.items():
            write_lines(
                root / "system-outputs" / lp / f"{system}.txt",
                [escape(t) if isinstance(t, str) else "" for t in rows["mt_text"]],
            )
        _write_scores(root / "human-scores", f"{lp}.{HUMAN}", cells, "human", judged=None)
        for column in scores:
            judged = {system: rows["human"].notna() for system, rows in cells.items()}
            if any(rows[f"metric:{column}"][judged[s]].isna().any() for s, rows in cells.items()):
                left_out.setdefault(lp, []).append(column)
                continue
            stem = metric_name(column, reference_free)
            _write_scores(root / "metric-scores" / lp, stem, cells, f"metric:{column}", judged)
    return left_out


def _write_scores(
    folder: Path,
    stem: str,
    cells: Mapping[str, pd.DataFrame],
    column: str,
    judged: Mapping[str, pd.Series] | None,
) -> None:
    """`<stem>.seg.score` (grouped by system) and `<stem>.sys.score`: human scores with None
    where not judged; metric scores with the system's mean there (`judged` given)."""
    segment_lines, system_lines = [], []
    for system, rows in cells.items():
        values = rows[column].to_numpy(float)
        mask = ~np.isnan(rows["human"].to_numpy(float))
        mean = float(values[mask].mean()) if mask.any() else math.nan
        if judged is not None:
            values = np.where(mask, values, mean)
        segment_lines += [f"{system} {_score(value)}" for value in values]
        system_lines.append(f"{system} {_score(mean)}")
    write_lines(folder / f"{stem}.seg.score", segment_lines)
    write_lines(folder / f"{stem}.sys.score", system_lines)
