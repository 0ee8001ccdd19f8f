"""MT Metrics Eval's own code as the oracle of the statistics correlations.csv names after it.

MTME (google-research/mt-metrics-eval) is not on PyPI (the package of that name there is an
unrelated project) and CI reaches no GitHub, so its outputs on the judgement tables below are
recorded, with the commit they came from, in `mtme_statistics.json`; the tests compare
correlations.csv to them (tests/test_mtme_statistics.py). With network, re-derive them from a
checkout of MTME (nothing of it is installed or copied: its `stats.py` is imported from the
checkout, in this process):

    git clone https://github.com/google-research/mt-metrics-eval /tmp/mtme
    git -C /tmp/mtme checkout 68a481aea1a787392d55af8f76ac8ef40c5f4664
    .venv/bin/python -m tests.mtme_oracle /tmp/mtme            # compare with the recorded
    .venv/bin/python -m tests.mtme_oracle /tmp/mtme --write    # record them again

Each table (seeded here) judges 5 directions, 40 source segments each, by 5 systems (one
direction by 2) on a 1-5 scale with ties; `missing` of its judgements are dropped at random.
Four metrics: continuous scores, scores rounded to one decimal and to integers (ties), and one
that could not score 8% of the translations. The scopes are correlations.csv's: every
direction, and the pools `all`, `into_english`, `out_of_english`, `without_english`. For each
scope and metric, MTME's matrix holds the systems of the scope in name order (rows) and its
source segments in (direction, segment id) order (columns), each cell a translation the metric
scored, `None` elsewhere, and MTME computes:

- `pearson`, `spearman`, `kendall`: `Correlation(...).Pearson()`, `.Spearman()`,
  `.Kendall()` (segment level, `average_by='none'`, as MTME's WMT tasks run them);
- `acc_eq`, `acc_eq_epsilon`: `KendallWithTiesOpt(variant='acc23', average_by='item',
  sample_rate=1.0)` (WMT23-25's segment-level accuracy task), its correlation and threshold;
- `system_pearson`: `Correlation(...).Pearson()` over the systems' mean scores, where the scope
  holds one direction of at least three systems (NaN elsewhere, as correlations.csv);
- `system_accuracy`: `Agreement` over the systems' mean scores of each direction, summed over
  the scope's directions (`data.CompareMetricsWithGlobalAccuracy`'s accuracy).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

MTME_COMMIT = "68a481aea1a787392d55af8f76ac8ef40c5f4664"
"""The commit of google-research/mt-metrics-eval the recorded statistics come from."""
FIXTURE = Path(__file__).resolve().parent / "mtme_statistics.json"
MISSING = (0.0, 0.1, 0.3, 0.6)
"""The share of judgements each table lacks."""
DIRECTIONS = (
    "eng_Latn-fra_Latn",
    "eng_Latn-swh_Latn",
    "deu_Latn-eng_Latn",
    "arb_Arab-fra_Latn",
    "hin_Deva-eng_Latn",
)
TWO_SYSTEMS = "hin_Deva-eng_Latn"
SYSTEMS = ("sys-a", "sys-b", "sys-c", "sys-d", "sys-e")
SEGMENTS = 40
METRICS = ("continuous", "decimal", "integer", "gappy")
ENGLISH = "eng_Latn"


def judgement_table(missing: float, seed: int = 39) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """A checked judgement table (correlations' columns) and each metric's scores per row,
    higher meaning better (NaN where the metric gave none)."""
    rng = np.random.default_rng([seed, int(missing * 100)])
    rows = []
    for direction in DIRECTIONS:
        src, tgt = direction.split("-")
        systems = SYSTEMS[:2] if direction == TWO_SYSTEMS else SYSTEMS
        for segment in range(SEGMENTS):
            for quality, system in enumerate(systems):
                # Systems close in quality, so that metrics order some of them otherwise.
                human = int(np.clip(np.rint(4.2 - 0.3 * quality + rng.normal(scale=1.2)), 1, 5))
                rows.append((src, tgt, system, f"{direction[:3]}-{segment:03d}", float(human)))
    table = pd.DataFrame(rows, columns=["src_lang", "tgt_lang", "system", "segment", "human"])
    table = table[rng.random(len(table)) >= missing].reset_index(drop=True)
    human = table["human"].to_numpy()
    scores = {
        "continuous": human + rng.normal(scale=1.2, size=len(table)),
        "decimal": (human + rng.normal(scale=1.5, size=len(table))).round(1),
        "integer": np.clip((2 * human + rng.normal(scale=2.0, size=len(table))).round(), 0, 10),
        "gappy": np.where(
            rng.random(len(table)) < 0.08, np.nan, human + rng.normal(size=len(table))
        ),
    }
    return table, scores


def tables() -> dict[str, tuple[pd.DataFrame, dict[str, np.ndarray]]]:
    return {f"missing-{int(share * 100)}": judgement_table(share) for share in MISSING}


def digest() -> str:
    """What the recorded statistics were computed from: every table's rows and scores."""
    hashed = hashlib.sha256()
    for name, (table, scores) in tables().items():
        hashed.update(name.encode())
        hashed.update(table.to_csv(index=False).encode())
        for metric in METRICS:
            hashed.update(np.ascontiguousarray(scores[metric]).tobytes())
    return hashed.hexdigest()


def scope_masks(table: pd.DataFrame) -> Iterator[tuple[str, np.ndarray]]:
    """(name, row mask) of every scope of correlations.csv: directions, then the pools."""
    direction = (table["src_lang"] + "-" + table["tgt_lang"]).to_numpy()
    for name in sorted(set(direction)):
        yield name, direction == name
    yield "all", np.ones(len(table), bool)
    yield "into_english", (table["tgt_lang"] == ENGLISH).to_numpy()
    yield "out_of_english", (table["src_lang"] == ENGLISH).to_numpy()
    without = (table["src_lang"] != ENGLISH) & (table["tgt_lang"] != ENGLISH)
    yield "without_english", without.to_numpy()


def _finite(value: Any) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def mtme_scope(stats: Any, part: pd.DataFrame, metric: np.ndarray) -> dict[str, float | None]:
    """MTME's statistics of one scope and metric (`part`: the rows the metric scored)."""
    systems = sorted(set(part["system"]))
    direction = part["src_lang"] + "-" + part["tgt_lang"]
    items = sorted(set(zip(direction, part["segment"], strict=True)))
    column = {item: position for position, item in enumerate(items)}
    gold: list[float | None] = [None] * (len(systems) * len(items))
    scores: list[float | None] = [None] * len(gold)
    keys = zip(part["system"], direction, part["segment"], strict=True)
    for (system, *item), human, value in zip(keys, part["human"], metric, strict=True):
        cell = systems.index(system) * len(items) + column[tuple(item)]
        gold[cell], scores[cell] = float(human), float(value)
    segment_level = stats.Correlation(len(systems), gold, scores)
    accuracy, epsilon, _ = stats.KendallWithTiesOpt(
        gold, scores, variant="acc23", num_sys=len(systems), average_by="item", sample_rate=1.0
    )
    # The method correlations take in MTME's tasks gives the same number.
    assert segment_level.KendallWithTiesOpt(average_by="item", sample_rate=1.0)[0] == accuracy
    found = {
        "pearson": segment_level.Pearson()[0],
        "spearman": segment_level.Spearman()[0],
        "kendall": segment_level.Kendall()[0],
        "acc_eq": accuracy,
        "acc_eq_epsilon": epsilon,
    }
    # System level: each system's mean over its scored, judged segments of a direction.
    agreeing = pairs = 0
    directions = part.groupby(["src_lang", "tgt_lang"], sort=True)
    system_pearson = float("nan")
    for _, rows in directions:
        values = metric[part.index.get_indexer(rows.index)]
        means = rows.assign(metric=values).groupby("system", sort=True)[["human", "metric"]]
        human_means, metric_means = (means.mean()[c].tolist() for c in ("human", "metric"))
        agree, count = stats.Agreement(human_means, metric_means)
        agreeing, pairs = agreeing + agree, pairs + count
        if directions.ngroups == 1 and len(human_means) >= 3:
            system = stats.Correlation(len(human_means), human_means, metric_means)
            system_pearson = system.Pearson()[0]
    found["system_pearson"] = system_pearson
    found["system_accuracy"] = agreeing / pairs if pairs else float("nan")
    return {name: _finite(value) for name, value in found.items()}


def mtme_statistics(checkout: Path) -> dict[str, Any]:
    """MTME's statistics of every table, scope and metric, computed by the checkout's code."""
    sys.path.insert(0, str(checkout))
    try:
        stats = importlib.import_module("mt_metrics_eval.stats")
    finally:
        sys.path.remove(str(checkout))
    if not Path(str(stats.__file__)).resolve().is_relative_to(checkout.resolve()):
        raise RuntimeError(f"mt_metrics_eval was imported from {stats.__file__}, not {checkout}")
    found: dict[str, Any] = {}
    for name, (table, scores) in tables().items():
        found[name] = {}
        for scope, mask in scope_masks(table):
            found[name][scope] = {}
            for metric in METRICS:
                rows = np.flatnonzero(mask & np.isfinite(scores[metric]))
                part = table.iloc[rows].reset_index(drop=True)
                found[name][scope][metric] = mtme_scope(stats, part, scores[metric][rows])
    return found


def checkout_commit(checkout: Path) -> str:
    result = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return result.stdout.strip() if result.returncode == 0 else "unknown (not a git checkout)"


def record(checkout: Path) -> dict[str, Any]:
    stats_file = checkout / "mt_metrics_eval" / "stats.py"
    optimization = checkout / "mt_metrics_eval" / "tau_optimization.py"
    return {
        "mtme_commit": checkout_commit(checkout),
        "mtme_files_sha256": {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in (stats_file, optimization)
        },
        "computed_with": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": importlib.import_module("scipy").__version__,
        },
        "tables_sha256": digest(),
        "statistics": mtme_statistics(checkout),
    }


def differences(expected: dict[str, Any], found: dict[str, Any]) -> list[str]:
    """Where two sets of statistics differ by more than 1e-9 (or in being defined)."""
    lines = []
    for name, scopes in expected.items():
        for scope, metrics in scopes.items():
            for metric, values in metrics.items():
                for statistic, value in values.items():
                    other = found.get(name, {}).get(scope, {}).get(metric, {}).get(statistic)
                    same = (value is None and other is None) or (
                        value is not None and other is not None and abs(value - other) <= 1e-9
                    )
                    if not same:
                        lines.append(f"{name} {scope} {metric} {statistic}: {value} vs {other}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of google-research/mt-metrics-eval")
    parser.add_argument("--write", action="store_true", help=f"record them in {FIXTURE.name}")
    arguments = parser.parse_args()
    computed = record(arguments.checkout)
    if computed["mtme_commit"] != MTME_COMMIT:
        print(f"note: the checkout is at {computed['mtme_commit']}, not {MTME_COMMIT}")
    if arguments.write:
        FIXTURE.write_text(json.dumps(computed, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {FIXTURE}")
        return 0
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    found = differences(recorded["statistics"], computed["statistics"])
    found += differences(computed["statistics"], recorded["statistics"])
    for line in found:
        print(line)
    print(f"{len(found)} differences from {FIXTURE.name} (recorded at {recorded['mtme_commit']})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
