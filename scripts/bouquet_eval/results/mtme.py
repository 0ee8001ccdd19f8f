"""Export to MT Metrics Eval's file layout (google-research/mt-metrics-eval), one test set.

Each direction `<src>-<tgt>` is a language pair (an MTME EvalSet); every model is a system,
the dataset's reference is `refA`, and every computed metric is a metric, at segment level
(sentence scores) and system level (the corpus score where the metric has one, else the mean
of the sentence scores). Reference-free scores are named `-src`, as MTME names them.

One segment per line: a newline inside a segment is written as the two characters `\\n`, a
carriage return as `\\r` and a backslash as `\\\\` (`unescape` reverses this). MTME's reader
strips trailing whitespace from every line.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from bouquet_eval.core.io import write_atomically
from bouquet_eval.data.dataset import DatasetSource, Direction
from bouquet_eval.metrics import Metric
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.results.aggregate import GROUP_COLUMNS

log = logging.getLogger(__name__)

TEST_SET = "bouquet"
REFERENCE = "refA"
REFERENCE_FREE = "src"
DEFAULT_DOMAIN = "bouquet"
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}


def escape(text: str) -> str:
    return re.sub(r"[\\\n\r]", lambda match: _ESCAPES[match.group()], text)


def unescape(line: str) -> str:
    return re.sub(r"\\[\\nr]", lambda match: _UNESCAPES[match.group()], line)


def reference_free_columns(metrics: Sequence[Metric]) -> set[str]:
    """Score columns computed without the reference: GlotLID, MetricX in QE mode, ..."""
    return MetricSet.of_loaded(metrics).reference_free_columns()


def metric_name(column: str, reference_free: set[str]) -> str:
    return f"{column}-{REFERENCE_FREE if column in reference_free else REFERENCE}"


def documents(rows: pd.DataFrame) -> list[str]:
    """`DOMAIN DOCNAME` per segment: BOUQuET's domain and paragraph where the data has them.

    MTME needs each document's segments to be contiguous and in one domain; otherwise every
    segment is a document of its own.
    """
    domains = _names(rows["domain"]) if "domain" in rows else [DEFAULT_DOMAIN] * len(rows)
    docs = _names(rows["par_id"]) if "par_id" in rows else _names(rows["uniq_id"])
    pairs = list(zip(domains, docs, strict=True))
    blocks = [doc for i, doc in enumerate(docs) if i == 0 or doc != docs[i - 1]]
    if len(blocks) != len(set(blocks)) or len(set(pairs)) != len(set(docs)):
        docs = _names(rows["uniq_id"])
    return [f"{domain} {doc}" for domain, doc in zip(domains, docs, strict=True)]


def _names(values: pd.Series) -> list[str]:
    """Names without whitespace, which separates the fields of MTME's files."""
    return [re.sub(r"\s+", "_", str(value)) or "_" for value in values]


def write_lines(path: Path, lines: Sequence[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def _score(value: float) -> str:
    return repr(float(value))


def export_direction(
    root: Path,
    direction: Direction,
    dataset_rows: pd.DataFrame,
    rows_by_model: Mapping[str, pd.DataFrame],
    scores_by_model: Mapping[str, pd.DataFrame],
    columns: Sequence[str],
    reference_free: set[str],
) -> list[str]:
    """Write one language pair; the metrics left out (missing scores), if any."""
    lp = direction.name
    write_lines(root / "documents" / f"{lp}.docs", documents(dataset_rows))
    write_lines(root / "sources" / f"{lp}.txt", [escape(t) for t in dataset_rows["src_text"]])
    write_lines(
        root / "references" / f"{lp}.{REFERENCE}.txt",
        [escape(t) for t in dataset_rows["tgt_text"]],
    )
    order = dataset_rows["uniq_id"].tolist()
    aligned = {}
    for model, rows in rows_by_model.items():
        part = rows[
            (rows["src_lang"] == direction.src_lang) & (rows["tgt_lang"] == direction.tgt_lang)
        ]
        part = part.set_index("uniq_id")
        missing = [uid for uid in order if uid not in part.index]
        if missing or len(part) != len(order):
            raise ValueError(
                f"model '{model}', direction {lp}: its scored rows do not match the dataset's "
                f"{len(order)} sentences (e.g. {missing[:1] or 'extra rows'})"
            )
        aligned[model] = part.loc[order]
        write_lines(
            root / "system-outputs" / lp / f"{model}.txt",
            [escape(t) for t in aligned[model]["mt_text"]],
        )
    left_out = []
    for column in columns:
        values = {
            m: pd.to_numeric(a[column], errors="coerce") for m, a in aligned.items() if column in a
        }
        if len(values) < len(aligned) or any(v.isna().any() for v in values.values()):
            # MTME accepts no missing metric score (GlotLID has no label for some languages).
            left_out.append(column)
            continue
        name = metric_name(column, reference_free)
        folder = root / "metric-scores" / lp
        write_lines(
            folder / f"{name}.seg.score",
            [f"{model} {_score(value)}" for model, series in values.items() for value in series],
        )
        write_lines(
            folder / f"{name}.sys.score",
            [
                f"{model} {_score(system_score(scores_by_model[model], direction, column))}"
                for model in values
            ],
        )
    return left_out


def system_score(scores: pd.DataFrame, direction: Direction, column: str) -> float:
    """The corpus-level score where the metric has one, else the mean of sentence scores."""
    row = scores[
        (scores["src_lang"] == direction.src_lang) & (scores["tgt_lang"] == direction.tgt_lang)
    ]
    if row.empty:
        raise ValueError(f"scores.csv has no row for {direction}")
    corpus = f"{column}_corpus"
    value = row[corpus].iloc[0] if corpus in row else math.nan
    return float(row[column].iloc[0]) if pd.isna(value) else float(value)


def export(
    root: Path,
    directions: Sequence[Direction],
    dataset: DatasetSource,
    limit: int | None,
    rows_by_model: Mapping[str, pd.DataFrame],
    scores_by_model: Mapping[str, pd.DataFrame],
    columns: Sequence[str],
    metrics: Sequence[Metric],
) -> None:
    """Write `root` (…/mtme/bouquet) for every direction."""
    free = reference_free_columns(metrics)
    for direction in directions:
        left_out = export_direction(
            root,
            direction,
            dataset.load(direction, limit),
            rows_by_model,
            scores_by_model,
            columns,
            free,
        )
        if left_out:
            log.info("%s: %s left out (missing scores)", direction, ", ".join(left_out))


def needed_columns(columns: Sequence[str]) -> list[str]:
    return [*GROUP_COLUMNS, "uniq_id", "mt_text", *columns]
