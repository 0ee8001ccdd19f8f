"""Scoring translations: every requested metric per sentence, resumable per direction.

Each family of metrics (`MetricSet.families`: one per environment, with a GPU or without)
scores in jobs of its own, which write each metric's columns apart (`score_metrics`); a
direction's scored file gathers them beside the translations (`gather_scores`). Adding a
metric to a finished run scores only that metric; removing one rescores nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bouquet_eval.core.environment import job_environment
from bouquet_eval.core.freshness import ResumableOutput, remove_stray_temporaries
from bouquet_eval.core.io import write_table
from bouquet_eval.data.dataset import DatasetSource, Direction
from bouquet_eval.data.outputs import (
    metric_scores_output,
    metric_scores_path,
    score_settings,
    scored_output,
    translation_path,
    written_by_translate_job,
)
from bouquet_eval.data.translations import read_checked_translations, read_translations
from bouquet_eval.metrics import Metric, add_composites, is_statistics_column, load_metrics
from bouquet_eval.metrics.records import MetricSet

log = logging.getLogger(__name__)


def score_directions(
    directions: Sequence[Direction],
    model_dir: Path,
    metrics: Sequence[Metric],
    dataset: DatasetSource,
    settings: Mapping[str, Any] | None = None,
    limit: int | None = None,
    environment: Mapping[str, Any] | None = None,
) -> None:
    """Score every metric in this process, then gather them into each direction's scored file:
    what the workflow's score jobs do between them, for a script of one's own.

    `settings` (see `outputs.score_settings`; by default the metrics' names, without settings)
    decide the scores with the translations and the dataset.
    """
    by_name = {metric.name: metric for metric in metrics}
    if settings is None:
        settings = score_settings(list(by_name), {})
    score_metrics(
        directions, model_dir, by_name, dataset, settings["settings"], limit, environment, settings
    )


def score_metrics(
    directions: Sequence[Direction],
    model_dir: Path,
    metrics: Mapping[str, Metric],
    dataset: DatasetSource,
    config: Mapping[str, Any],
    limit: int | None = None,
    environment: Mapping[str, Any] | None = None,
    scored_settings: Mapping[str, Any] | None = None,
) -> None:
    """Write each metric's columns of every direction where they are not current
    (`outputs.metric_scores_path`), the metrics being named as `metrics` lists them.

    A metric's configuration section decides its scores with the translations and the
    dataset; its signature, which adds the versions and devices of this job, is recorded too,
    and scores recorded under another signature are computed again. Translations are checked
    line by line against the dataset before they are scored. A metric loads its model on its
    first use, so a job with nothing to do loads nothing.

    `scored_settings` (`outputs.score_settings`), where `metrics` are all the metrics of the
    run (one family: `MetricSet.gathered_in_score_jobs`): each direction's scored file is
    written too, as `gather_scores` writes it, from the translations and scores at hand.
    """
    signatures = {name: metric.signature() for name, metric in metrics.items()}
    outputs = {
        direction: {
            name: replace(
                metric_scores_output(model_dir, name, direction, config, dataset.file(direction)),
                cache_variant=signatures[name],
            )
            for name in metrics
        }
        for direction in directions
    }
    remove_stray_temporaries([o for by_metric in outputs.values() for o in by_metric.values()])
    gathering = (
        None
        if scored_settings is None
        else _Gathering.of(directions, model_dir, dataset, scored_settings, limit)
    )
    writes = _PendingWrites(gathering)
    directions_in_order = list(outputs)
    total = len(directions_in_order)
    progress = {
        direction: f"[{position}/{total}] {direction}"
        for position, direction in enumerate(directions_in_order, start=1)
    }
    try:
        for first in range(0, total, BATCH_DIRECTIONS):
            batch = directions_in_order[first : first + BATCH_DIRECTIONS]
            stale = {
                direction: _stale(
                    outputs[direction], signatures, environment or {}, progress[direction]
                )
                for direction in batch
            }
            translations = {
                direction: translations_to_score(model_dir, direction, dataset, limit)
                for direction in batch
                if stale[direction]
            }
            for direction in batch:
                columns: dict[str, Mapping[str, Sequence[Any]]] = {}
                if stale[direction]:
                    started = time.monotonic()
                    for name in stale[direction]:
                        rows = translations[direction]
                        columns[name] = metrics[name].score(rows)
                    log.info(
                        "%s: %s on %d sentences in %.2f s",
                        progress[direction],
                        ", ".join(stale[direction]),
                        len(translations[direction]),
                        time.monotonic() - started,
                    )
                writes.add(
                    _Scored(
                        direction,
                        progress[direction],
                        stale[direction],
                        translations.get(direction),
                        columns,
                    )
                )
            writes.flush()
    finally:
        # What was scored is kept when a later direction fails or the job is interrupted.
        writes.flush()


BATCH_DIRECTIONS = 32
"""Directions whose translations a score job reads together, before scoring any of them, and
whose files it writes together after. Reading and writing a direction costs its CPU time
several times over when it comes between two directions' scoring, whose loop leaves the
caches cold (measured: chrF++ over 96 directions took 41.5 CPU-s a direction at a time, 34-35
in batches of 32, 31.5 for the reading and the bare metric loop apart)."""
WRITE_WITHIN_SECONDS = 30.0
"""Scores waiting to be written are written once the oldest has waited this long, so that a
slow metric (a large model on each direction) loses little to a crash."""


def _stale(
    outputs: Mapping[str, ResumableOutput],
    signatures: Mapping[str, str],
    environment: Mapping[str, Any],
    progress: str,
) -> dict[str, tuple[ResumableOutput, dict[str, Any]]]:
    """The metrics whose columns of a direction must be scored (by name: their output and
    what their record is to hold); those current, or restored from the cache, are not."""
    stale = {}
    for name, output in outputs.items():
        recorded = {**environment, "metrics": {name: signatures[name]}}
        if output.is_current() and _scored_with(output, recorded["metrics"]):
            continue
        if output.restore_from_cache(recorded):
            log.info("%s: %s restored from %s", progress, name, output.cached)
            continue
        stale[name] = (output, recorded)
    return stale


@dataclass(frozen=True)
class _Scored:
    """A direction's metric columns, scored and not yet written."""

    direction: Direction
    progress: str
    stale: Mapping[str, tuple[ResumableOutput, dict[str, Any]]]
    translations: pd.DataFrame | None
    columns: Mapping[str, Mapping[str, Sequence[Any]]]
    """By metric: the columns it returned."""


@dataclass
class _PendingWrites:
    """The directions scored since the last write (`score_metrics`' batches)."""

    gathering: _Gathering | None
    waiting: list[_Scored] = field(default_factory=list)
    since: float = 0.0

    def add(self, scored: _Scored) -> None:
        if not self.waiting:
            self.since = time.monotonic()
        self.waiting.append(scored)
        if time.monotonic() - self.since >= WRITE_WITHIN_SECONDS:
            self.flush()

    def flush(self) -> None:
        while self.waiting:
            scored = self.waiting.pop(0)
            rows = 0 if scored.translations is None else len(scored.translations)
            tables = {
                name: metric_table(columns, rows, name) for name, columns in scored.columns.items()
            }
            for name, (output, recorded) in scored.stale.items():
                output.publish(partial(write_table, table=tables[name]), recorded)
            gathered = self.gathering is not None and self.gathering.write(
                scored.direction, scored.progress, scored.translations, tables
            )
            if not scored.stale and not gathered:
                log.info("%s: up to date", scored.progress)


@dataclass(frozen=True)
class ScoreJob:
    """What a family of metrics' score job does, in a form another Python can be handed."""

    directions: list[Direction]
    model_dir: Path
    metrics: list[str]
    config: dict[str, Any]
    dataset: DatasetSource
    limit: int | None
    uses_gpu: bool
    scored_settings: dict[str, Any] | None = None
    """Where the family's metrics are all of the run's: `score_metrics`' `scored_settings`."""

    def run(self) -> None:
        """Score, recording what this process runs with (versions, GPUs, model commits)."""
        metrics = load_metrics(self.metrics, self.config)
        score_metrics(
            self.directions,
            self.model_dir,
            dict(zip(self.metrics, metrics, strict=True)),
            self.dataset,
            self.config,
            self.limit,
            {
                **job_environment(uses_gpu=self.uses_gpu),
                "models": MetricSet.of(self.metrics, self.config, metrics).provenance(),
            },
            self.scored_settings,
        )

    def run_in(self, python: str, log_path: Path) -> None:
        """Run in another environment's Python (`environments` of the configuration)."""
        run_in_python(self, f"scoring {', '.join(self.metrics)}", python, log_path)


class HandedJob(Protocol):
    """Work that another Python can be handed: picklable, done by `run`."""

    def run(self) -> None: ...


def run_in_python(job: HandedJob, what: str, python: str, log_path: Path) -> None:
    """Run `job` in another environment's Python (`environments` of the configuration), which
    imports this checkout's package too: the job is handed over in a file (`main`), and what
    it logs goes to `log_path` and stderr as it comes. `what` names it in messages."""
    with tempfile.TemporaryDirectory() as folder:
        handed = Path(folder) / "job.pickle"
        handed.write_bytes(pickle.dumps(job))
        log.info("%s in %s", what, python)
        command = [python, "-m", __name__, str(handed)]
        with (
            subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as child,
            log_path.open("a", encoding="utf-8") as log_file,
        ):
            assert child.stderr is not None
            for line in child.stderr:
                log_file.write(line)
                log_file.flush()
                sys.stderr.write(line)
        if child.returncode:
            raise RuntimeError(
                f"{what} in {python} failed (exit status {child.returncode}): see above"
            )


def metric_table(columns: Mapping[str, Sequence[Any]], rows: int, metric: str) -> pa.Table:
    """A metric's columns as they are stored: the values it returned, as they were (NaN too)."""
    for column, values in columns.items():
        if len(values) != rows:
            raise ValueError(
                f"metric {metric}: {len(values)} values in column {column} for {rows} sentences"
            )
    return pa.table({column: pa.array(list(values)) for column, values in columns.items()})


def gather_scores(
    directions: Sequence[Direction],
    model_dir: Path,
    dataset: DatasetSource,
    settings: Mapping[str, Any],
    limit: int | None = None,
) -> None:
    """Write `<model_dir>/<src>-<tgt>.scored.parquet` for every direction not current: the
    translations with the columns of every metric that `settings` (`outputs.score_settings`)
    lists, as the metrics' score jobs wrote them, and the composites they make up."""
    gathering = _Gathering.of(directions, model_dir, dataset, settings, limit)
    total = len(directions)
    for position, direction in enumerate(directions, start=1):
        progress = f"[{position}/{total}] {direction}"
        if not gathering.write(direction, progress):
            log.info("%s: up to date", progress)


@dataclass(frozen=True)
class _Gathering:
    """Writing the scored files of a job's directions (`gather_scores`)."""

    model_dir: Path
    dataset: DatasetSource
    settings: Mapping[str, Any]
    limit: int | None
    outputs: Mapping[Direction, ResumableOutput]

    @classmethod
    def of(
        cls,
        directions: Sequence[Direction],
        model_dir: Path,
        dataset: DatasetSource,
        settings: Mapping[str, Any],
        limit: int | None,
    ) -> _Gathering:
        outputs = {
            direction: scored_output(model_dir, direction, settings, dataset.file(direction))
            for direction in directions
        }
        remove_stray_temporaries(outputs.values())
        return cls(model_dir, dataset, settings, limit, outputs)

    def write(
        self,
        direction: Direction,
        progress: str,
        translations: pd.DataFrame | None = None,
        tables: Mapping[str, pa.Table] | None = None,
    ) -> bool:
        """Write the direction's scored file unless it is current; whether it was written.
        `translations` and `tables` (metric -> its columns), where the caller has them at hand,
        are not read again."""
        # Made anew: what it records of its inputs is read when it is written, and the
        # caller may just have written some of them.
        output = replace(self.outputs[direction])
        if output.is_current():
            return False
        metrics = list(self.settings["metrics"])
        paths = [metric_scores_path(self.model_dir, metric, direction) for metric in metrics]
        if translations is None:
            translations = _gathered_translations(
                self.model_dir, direction, self.dataset, self.settings, self.limit
            )
        columns: dict[str, pa.ChunkedArray] = {}
        for metric, path in zip(metrics, paths, strict=True):
            part = tables[metric] if tables and metric in tables else _read_table(path)
            if part.num_rows != len(translations):
                raise ValueError(
                    f"{path} has {part.num_rows} rows for {len(translations)} translations: "
                    "delete it to score its metric again"
                )
            columns.update(zip(part.column_names, part.columns, strict=True))
        # Score columns go through pandas, where the composites are computed; the statistics
        # (24 columns for chrF++ alone) go from file to file as arrow arrays.
        scores = {
            name: column.to_pylist()
            for name, column in columns.items()
            if not is_statistics_column(name)
        }
        scored, _ = _split_scores(translations, scores, metrics)
        statistics = {
            name: _stored_statistics(column)
            for name, column in columns.items()
            if is_statistics_column(name)
        }
        output.publish(
            partial(write_table, table=_table(scored, statistics)), gathered_environment(paths)
        )
        log.info("%s: %d sentences gathered", progress, len(translations))
        return True


def _read_table(path: Path) -> pa.Table:
    # One ParquetFile: faster than read_table's dataset machinery for a small file.
    with pq.ParquetFile(path) as parquet:
        return parquet.read()


def translations_to_score(
    model_dir: Path, direction: Direction, dataset: DatasetSource, limit: int | None
) -> pd.DataFrame:
    """The direction's translations, checked line by line against the dataset, unless they are
    what a translate job wrote from the same dataset file, which checked every line it wrote
    (`provided` translations too): those are only parsed."""
    rows = dataset.load(direction, limit)
    path = translation_path(model_dir, direction)
    if written_by_translate_job(model_dir, direction, dataset.file(direction)):
        with contextlib.suppress(ValueError):  # not as written: checked, and the error named
            return read_checked_translations(path, rows)
    return read_translations(path, direction, rows)


def _gathered_translations(
    model_dir: Path,
    direction: Direction,
    dataset: DatasetSource,
    settings: Mapping[str, Any],
    limit: int | None,
) -> pd.DataFrame:
    """The direction's translations, as the score jobs read them: only parsed when every
    metric's columns are current, since the jobs that wrote them checked these translations
    against this dataset file line by line; else checked again."""
    rows = dataset.load(direction, limit)
    path = translation_path(model_dir, direction)
    checked = all(
        metric_scores_output(
            model_dir, metric, direction, settings["settings"], dataset.file(direction)
        ).is_current()
        for metric in settings["metrics"]
    )
    if checked:
        return read_checked_translations(path, rows)
    return read_translations(path, direction, rows)


def _stored_statistics(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A statistics column as the scored files store it (`_table`): NaN as a missing value."""
    if pa.types.is_floating(column.type):
        return pc.if_else(pc.is_nan(column), pa.scalar(None, column.type), column)
    return column


def gathered_environment(paths: Sequence[Path]) -> dict[str, Any]:
    """What a scored file records of the jobs that scored its metrics: every signature, and the
    distinct environments (versions, GPUs, model commits) of those jobs."""
    signatures: dict[str, str] = {}
    environments: dict[str, dict[str, Any]] = {}
    for path in paths:
        environment = dict((ResumableOutput(path, {}).record() or {}).get("environment") or {})
        signatures.update(environment.pop("metrics", {}))
        environments.setdefault(json.dumps(environment, sort_keys=True), environment)
    return {"metrics": signatures, "scored_by": list(environments.values())}


def _scored_with(output: ResumableOutput, signatures: Mapping[str, str]) -> bool:
    record = output.record() or {}
    return (record.get("environment") or {}).get("metrics") == dict(signatures)


def score_rows(rows: pd.DataFrame, metrics: Sequence[Metric]) -> pd.DataFrame:
    """`rows` with every metric's columns, then the statistics of the corpus metrics."""
    scored, statistics = _with_scores(rows, metrics)
    return scored.assign(**statistics)


def scored_table(rows: pd.DataFrame, metrics: Sequence[Metric]) -> pa.Table:
    """What a direction's scored file holds: the columns of `score_rows`, with the same types.

    The statistics (24 columns for chrF++ alone) go straight into arrow arrays: through pandas
    they cost a few times more than the rest of the file.
    """
    return _table(*_with_scores(rows, metrics))


def _table(scored: pd.DataFrame, statistics: Mapping[str, list[Any] | pa.ChunkedArray]) -> pa.Table:
    table = pa.Table.from_pandas(scored, preserve_index=False)
    for name, values in statistics.items():
        if not isinstance(values, pa.ChunkedArray):
            values = pa.array(values, from_pandas=True)
        table = table.append_column(name, values)
    return table


def _with_scores(
    rows: pd.DataFrame, metrics: Sequence[Metric]
) -> tuple[pd.DataFrame, dict[str, list[Any]]]:
    """`rows` with every metric's score columns and the composites; apart, the statistics."""
    added = {
        column: list(values) for metric in metrics for column, values in metric.score(rows).items()
    }
    return _split_scores(rows, added, [metric.name for metric in metrics])


def _split_scores(
    rows: pd.DataFrame, added: Mapping[str, list[Any]], metrics: Sequence[str]
) -> tuple[pd.DataFrame, dict[str, list[Any]]]:
    """`rows` with the score columns of `added` and the composites of `metrics`; apart, the
    statistics columns of `added`."""
    scores = {name: values for name, values in added.items() if not is_statistics_column(name)}
    statistics = {name: values for name, values in added.items() if is_statistics_column(name)}
    scored = rows.assign(**scores)
    add_composites(scored, metrics)
    return scored, statistics


def main(handed: str) -> None:
    """Run the job pickled in `handed` (a ScoreJob, or another `HandedJob`), logging to stderr
    (`run_in_python`)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    job = pickle.loads(Path(handed).read_bytes())
    job.run()


if __name__ == "__main__":
    main(sys.argv[1])
