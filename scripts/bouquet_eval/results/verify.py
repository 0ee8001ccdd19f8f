"""Verification of a model's claimed scores: rescore its translations from scratch and compare.

Nothing scored before is reused (no `.scored.parquet`, no cache): every sentence of every
configured direction (and of any other direction that `scores.csv` lists) is checked against the
dataset (source, reference, order and count, as for provided translations), scored against the
dataset's references with the configured metrics, and aggregated by the code that wrote
`scores.csv`. A claim must be complete: a configured direction or metric that `scores.csv` leaves
out fails the verification as a value that differs does, so that no submission passes by
dropping its worst directions.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bouquet_eval.core.io import file_sha256
from bouquet_eval.core.names import shown
from bouquet_eval.core.stats import Resampling
from bouquet_eval.data.dataset import DatasetSource, Direction
from bouquet_eval.data.outputs import translation_path
from bouquet_eval.data.received import (
    CLAIM,
    ArchiveLimits,
    Claim,
    ReceivedSubmission,
    SubmissionError,
)
from bouquet_eval.data.received import read_claim as received_claim
from bouquet_eval.data.translations import read_translations
from bouquet_eval.metrics import Metric, corpus_metrics, load_metrics, metric_columns
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.results.aggregate import GROUP_COLUMNS, UNSEEN, direction_scores
from bouquet_eval.scoring.score import run_in_python, score_rows

log = logging.getLogger(__name__)

# Largest absolute difference between a claimed and a recomputed value that still agrees:
# each metric's record says its own (bouquet_eval.metrics.records); a column none names gets
# DEFAULT_TOLERANCE.
DEFAULT_TOLERANCE = 1e-6


def tolerances(metrics: Sequence[Metric]) -> dict[str, float]:
    """Per scores.csv column, the tolerances of the metrics' records; sentence counts exact."""
    return {"n_sentences": 0.0, **MetricSet.of_loaded(metrics).tolerances()}


OK, DIFFERS, NOT_RECOMPUTED, NOT_CLAIMED = "ok", "differs", "not recomputed", "not claimed"
FAILED = (DIFFERS, NOT_CLAIMED)
VERIFICATION_COLUMNS = [
    *GROUP_COLUMNS,
    "metric",
    "claimed",
    "recomputed",
    "difference",
    "tolerance",
    "status",
]


def directions_to_verify(configured: Sequence[Direction], claim: Claim) -> list[Direction]:
    """The configured directions, then any other that the claim lists (in its order; each is
    one of the dataset's, `received.read_claim` checked it)."""
    return list(dict.fromkeys([*configured, *claim.directions]))


def read_claim(path: Path, label: str, known: Sequence[Direction], limits: ArchiveLimits) -> Claim:
    """The claim in `path` (scores.csv), checked (`received.read_claim`) within `limits` (a
    received submission's, `verify.limits`); `label` names it in messages (a configured
    model's file, or a received submission's member)."""
    if not path.is_file():
        raise SubmissionError(f"{label}: no {CLAIM} to verify")
    with open(path, "rb") as content:
        return received_claim(content, label, known, limits)


def rescore(
    model_dir: Path,
    directions: Sequence[Direction],
    dataset: DatasetSource,
    limit: int | None,
    metrics: Sequence[Metric],
    resampling: Resampling,
    submission: ReceivedSubmission | None = None,
) -> pd.DataFrame:
    """Per-direction scores of the translations in `model_dir`, computed from scratch; where
    they were unpacked from a `submission`, messages name its members."""
    scored = []
    for position, direction in enumerate(directions, start=1):
        path = translation_path(model_dir, direction)
        label = str(path) if submission is None else submission.file_label(path.name)
        if not path.is_file():
            raise SubmissionError(
                f"{label}: not found, so direction {direction} cannot be verified"
            )
        # Checked line by line against the dataset; the reference scored is the dataset's.
        frame = read_translations(
            path,
            direction,
            dataset.load(direction, limit),
            extra_lines_allowed=limit is not None,
            label=label,
        )
        scored.append(score_rows(frame, metrics))
        log.info("[%d/%d] %s rescored", position, len(directions), direction)
    return direction_scores(
        pd.concat(scored, ignore_index=True),
        metric_columns(metrics),
        resampling,
        corpus_metrics(metrics),
    )


@dataclass(frozen=True)
class Rescoring:
    """`rescore` with the metrics named, in a form another Python can be handed
    (`scoring.score.run_in_python`): the Python of the environment the metrics run in, where
    the configuration's `environments` names one (COMET's, whose packages the workflow's own
    environment cannot hold)."""

    model_dir: Path
    directions: list[Direction]
    dataset: DatasetSource
    limit: int | None
    metrics: list[str]
    config: dict[str, Any]
    resampling: Resampling
    output: Path
    """Where `run` writes the scores (parquet), for the Python that handed it over."""
    submission: ReceivedSubmission | None = None
    """The received submission whose files `model_dir` holds, for messages."""

    def scores(self) -> pd.DataFrame:
        return rescore(
            self.model_dir,
            self.directions,
            self.dataset,
            self.limit,
            load_metrics(self.metrics, self.config),
            self.resampling,
            self.submission,
        )

    def run(self) -> None:
        self.scores().to_parquet(self.output, index=False)

    def scores_in(self, python: str, log_path: Path) -> pd.DataFrame:
        """The scores, computed in `python`."""
        run_in_python(self, f"rescoring with {', '.join(self.metrics)}", python, log_path)
        return pd.read_parquet(self.output)


def compared_columns(frame: pd.DataFrame) -> list[str]:
    """n_sentences, then each metric's mean and corpus score (not the intervals, nor the
    learned metrics that never saw the direction's languages, which is no score but what
    their records say)."""
    return [
        c
        for c in frame.columns
        if c not in (*GROUP_COLUMNS, UNSEEN) and not c.endswith(("_ci_low", "_ci_high"))
    ]


def compare_scores(
    claimed: pd.DataFrame, recomputed: pd.DataFrame, tolerances: Mapping[str, float]
) -> pd.DataFrame:
    """One row per direction and value: claimed, recomputed, difference and status. Rows are
    matched by direction, the claim's columns by name, whatever they are called (no column of
    a claim can stand for another)."""
    claims = _by_direction(claimed)
    recomputations = _by_direction(recomputed)
    claimed_columns = set(compared_columns(claimed))
    recomputed_columns = set(compared_columns(recomputed))
    columns = list(dict.fromkeys(compared_columns(claimed) + compared_columns(recomputed)))
    records = []
    for direction in sorted(claims.keys() | recomputations.keys()):
        claim_row = claims.get(direction)
        recomputed_row = recomputations.get(direction)
        for column in columns:
            in_claim = claim_row is not None and column in claimed_columns
            in_recomputed = recomputed_row is not None and column in recomputed_columns
            claim = float(claim_row[column]) if in_claim else math.nan  # type: ignore[index]
            value = float(recomputed_row[column]) if in_recomputed else math.nan  # type: ignore[index]
            tolerance = tolerances.get(column, DEFAULT_TOLERANCE)
            records.append(
                {
                    "src_lang": direction[0],
                    "tgt_lang": direction[1],
                    "metric": column,
                    "claimed": claim,
                    "recomputed": value,
                    "difference": value - claim,
                    "tolerance": tolerance,
                    "status": _status(claim, value, tolerance, in_claim, in_recomputed),
                }
            )
    return pd.DataFrame.from_records(records, columns=VERIFICATION_COLUMNS)


def _by_direction(frame: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (str(row["src_lang"]), str(row["tgt_lang"])): row for row in frame.to_dict(orient="records")
    }


def _status(claim: float, value: float, tolerance: float, claimed: bool, recomputed: bool) -> str:
    if not recomputed:
        return NOT_RECOMPUTED
    if not claimed:
        return NOT_CLAIMED
    if math.isnan(claim) and math.isnan(value):
        return OK
    if math.isnan(claim) or math.isnan(value) or abs(value - claim) > tolerance:
        return DIFFERS
    return OK


def failing(verification: pd.DataFrame, allow_unchecked: bool = False) -> pd.DataFrame:
    """The rows that fail a verification: values that differ or are not claimed, and values
    claimed that this configuration did not recompute unless `allow_unchecked`."""
    statuses = FAILED if allow_unchecked else (*FAILED, NOT_RECOMPUTED)
    return verification[verification["status"].isin(statuses)]


def mismatch_message(
    model: str, verification: pd.DataFrame, allow_unchecked: bool = False, shown_rows: int = 10
) -> str | None:
    """A message naming every value that fails (the first `shown_rows`, see `failing`), or
    None if every recomputed value is claimed and agrees and every claimed value was
    recomputed (or `allow_unchecked`)."""
    failed = failing(verification, allow_unchecked)
    if failed.empty:
        return None
    lines = [
        f"model {shown(model)}, direction {r.src_lang}-{r.tgt_lang}, "
        f"{shown(r.metric, quoted=False)}: "
        + (
            f"claimed {r.claimed!r}, recomputed {r.recomputed!r} (tolerance {r.tolerance:g})"
            if r.status == DIFFERS
            else f"not in scores.csv, recomputed {r.recomputed!r}"
            if r.status == NOT_CLAIMED
            else f"claimed {r.claimed!r}, not recomputed: this configuration does not compute it "
            "(add its metric to metrics, or allow it with verify.allow_unchecked_claims)"
        )
        for r in failed.head(shown_rows).itertuples(index=False)
    ]
    if len(failed) > shown_rows:
        lines.append(f"... and {len(failed) - shown_rows} more")
    return "\n".join(lines)


def what_was_checked(verification: pd.DataFrame) -> str:
    """Which claimed values were checked (recomputed and compared) and which were not, by
    column, over how many directions."""
    directions = len(verification[["src_lang", "tgt_lang"]].drop_duplicates())
    recomputed = verification["status"] != NOT_RECOMPUTED
    checked = _listed(verification.loc[recomputed, "metric"])
    summary = f"checked {checked or 'nothing'} in {directions} directions"
    unchecked = _listed(verification.loc[~recomputed, "metric"])
    if unchecked:
        summary += f"; not checked (this configuration does not recompute them): {unchecked}"
    return summary


def _listed(columns: pd.Series) -> str:
    return ", ".join(shown(column, quoted=False) for column in sorted(set(columns)))


def claim_fingerprint(model_dir: Path) -> dict[str, str]:
    """Digests of what a verification reads: it is redone when any of them changes."""
    files = [model_dir / "scores.csv", *sorted(model_dir.glob("*.jsonl"))]
    return {path.name: file_sha256(path) for path in files if path.is_file()}
