"""What the report takes of each model's sentences, made once by the model's own job.

The report's pages that span models need little of a model's ~900,000 sentence scores: per
score column the statistics of its violin (`violin_of`), its worst sentences in each direction
on the primary metric (`views.worst_sentences`), and one sample sentence per direction
(`views.sample_sentences`), with their texts. Each model's aggregation takes them from the rows
it writes into scored_rows.parquet (`ExtractBuilder`, the same as `model_extract` of that file)
into report_extract.parquet beside it, one of its aggregates: new scores make a new extract.
The leaderboard job then reads the extracts and, of each model's rows, only the column of the
primary metric (`from_extracts`): adding a model reads its extract, not every model's rows and
texts again.

The sentences page also shows every model's score of the other models' worst sentences, and
each sentence's source and reference, which the page took from the first model's rows. Both are
found by position, which holds when every model lists the same sentences, with the same
sources and references, in the same order (the `ReportExtract.sentences` digests are equal).
Where they do not, where an extract lacks what the report asks for, or where the primary
metric's scores are not those the extract was made from (a stale extract), the report is made
from the models' rows, as without extracts.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bouquet_eval.core.io import atomic_path
from bouquet_eval.data import outputs
from bouquet_eval.results.aggregate import GROUP_COLUMNS
from bouquet_eval.results.leaderboard import primary_metric
from bouquet_eval.results.views import (
    WORST_SENTENCES,
    sample_sentences,
    sentences_json,
    wanted_sentences,
    worst_sentences,
)

log = logging.getLogger(__name__)

EXTRACT_FILE = outputs.EXTRACT_FILE
SENTENCE_KEY = [*GROUP_COLUMNS, "uniq_id"]
POSITION = "position"
"""The column of an extract's rows holding their positions (from 0) in scored_rows.parquet."""
METADATA_KEY = b"bouquet_eval.report_extract"

CHUNK_ROWS = 1 << 17
"""Rows an `ExtractBuilder` takes at a time (a direction is about 850)."""
DENSITY_BINS = 4096
"""Bins of the histogram a violin's density is smoothed from (see `binned_density`)."""


def binned_density(values: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """matplotlib's violin density (a Gaussian kernel with Scott's bandwidth, the standard
    deviation times n^(-1/5)) of the sentence scores at `coords`, from a fine histogram of
    them: a 854,000-sentence model costs one pass over its scores, not one kernel per sentence
    and point. Bins are far narrower than the kernel (1/4096 of the range), so the curve
    differs from the exact one by less than a line's width."""
    counts, edges = np.histogram(values, bins=DENSITY_BINS, range=(coords[0], coords[-1]))
    bandwidth = float(np.std(values, ddof=1)) * values.size ** (-1 / 5) if values.size > 1 else 0
    if not bandwidth > 0:  # every score the same: a flat violin
        return np.ones_like(coords)
    centres = (edges[:-1] + edges[1:]) / 2
    kernel = np.exp(-0.5 * ((coords[:, None] - centres[None, :]) / bandwidth) ** 2)
    return kernel @ counts / (values.size * bandwidth * np.sqrt(2 * np.pi))


def finite_values(values: pd.Series) -> np.ndarray:
    """The values that are finite numbers, as floats."""
    array = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    return array[np.isfinite(array)]


VIOLIN_POINTS = 100
"""Where a violin's density is evaluated (matplotlib's `violin_stats` default)."""


def violin_of(values: pd.Series) -> dict[str, Any] | None:
    """matplotlib's violin statistics of a model's sentence scores on one metric (their
    density from `binned_density`, mean, median, extremes), as its `cbook.violin_stats` makes
    them, number for number, without importing matplotlib (the aggregation makes them, which
    draws nothing); None where it has no score. Made a model at a time: the figure needs
    these, not the scores."""
    finite = finite_values(values)
    if not finite.size:
        return None
    low, high = np.min(finite), np.max(finite)
    coords = np.linspace(low, high, VIOLIN_POINTS)
    return {
        "vals": binned_density(finite, coords),
        "coords": coords,
        "mean": np.mean(finite),
        "median": np.median(finite),
        "min": low,
        "max": high,
        "quantiles": np.array([]),
    }


SENTENCE_TEXTS = ("src_text", "ref_text")
"""The texts of a sentence, the same for every model of a run (those of the dataset)."""


class SentencesDigest:
    """The digest of a scored_rows file's sentences in order (keys and `SENTENCE_TEXTS`, those
    it has): per hashed column, its lengths and its characters apart, so that it is the same
    whatever the file's row groups and batches, or the tables it is fed a direction at a time."""

    def __init__(self, names: Sequence[str]) -> None:
        self.hashed = [*SENTENCE_KEY, *(t for t in SENTENCE_TEXTS if t in names)]
        self.digests = {(c, part): hashlib.sha256() for c in self.hashed for part in (0, 1)}
        self.rows = 0

    def add(self, table: Any) -> None:
        """The next rows, an arrow table or record batch holding the hashed columns."""
        import pyarrow as pa
        import pyarrow.compute as pc

        for column in self.hashed:
            values = pc.cast(table.column(column), pa.large_string())
            for chunk in getattr(values, "chunks", [values]):
                _hash_strings(chunk, self.digests[column, 0], self.digests[column, 1])
        self.rows += table.num_rows

    def hexdigest(self) -> str:
        total = hashlib.sha256(f"{self.rows}:{','.join(self.hashed)}".encode())
        for digest in self.digests.values():
            total.update(digest.digest())
        return total.hexdigest()


def scan_texts(path: Path, positions: np.ndarray) -> tuple[str, pd.DataFrame]:
    """One pass over a scored_rows file, a batch of rows at a time: a digest of its
    sentences in order (keys and `SENTENCE_TEXTS`; two files with the same digest hold the
    same sentences, texts included, at the same positions), and the texts (`SENTENCE_TEXTS`
    and `mt_text`, those it has) of the rows at `positions` (sorted), indexed by them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as scored:
        names = scored.schema_arrow.names
        digest = SentencesDigest(names)
        kept = text_columns(names)
        taken, start = [], 0
        for batch in scored.iter_batches(columns=list(dict.fromkeys([*digest.hashed, *kept]))):
            digest.add(batch)
            inside = positions[(positions >= start) & (positions < start + batch.num_rows)]
            if kept and inside.size:
                taken.append(batch.select(kept).take(pa.array(inside - start)))
            start += batch.num_rows
    texts = (
        pa.Table.from_batches(taken).to_pandas()
        if taken
        else pd.DataFrame({c: pd.Series(dtype=object) for c in kept})
    )
    if len(texts) != len(positions):
        raise ValueError(f"{path}: {start} rows, no row at some of {positions.tolist()}")
    return digest.hexdigest(), texts.set_axis(positions)


def text_columns(names: Sequence[str]) -> list[str]:
    """The texts an extract keeps of its rows: `SENTENCE_TEXTS` and `mt_text`, those of `names`."""
    return [t for t in (*SENTENCE_TEXTS, "mt_text") if t in names]


def _hash_strings(values: Any, lengths: Any, characters: Any) -> None:
    """Feed an arrow large_string array's lengths and characters to two digests."""
    if not len(values):
        return
    _, offsets_buffer, data = values.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)
    offsets = offsets[values.offset : values.offset + len(values) + 1]
    lengths.update(np.diff(offsets).tobytes())
    if data is not None:
        characters.update(memoryview(data)[offsets[0] : offsets[-1]])


def column_values(path: Path, column: str) -> np.ndarray:
    """One score column of a scored_rows file, missing scores as NaN."""
    import pyarrow.parquet as pq

    return np.asarray(pq.read_table(path, columns=[column]).column(0), dtype=float)


def values_digest(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def _to_json(violin: dict[str, Any] | None) -> dict[str, Any] | None:
    if violin is None:
        return None
    return {
        key: value.tolist() if isinstance(value, np.ndarray) else float(value)
        for key, value in violin.items()
    }


def _from_json(violin: dict[str, Any] | None) -> dict[str, Any] | None:
    if violin is None:
        return None
    return {
        key: np.asarray(value, dtype=float) if isinstance(value, list) else value
        for key, value in violin.items()
    }


@dataclass(frozen=True)
class ReportExtract:
    """One model's share of the report's pages that span models (see the module docstring)."""

    sentences: str
    """The digest of its scored_rows.parquet's sentences (`scan_texts`)."""
    columns: list[str]
    """The score columns it was asked for."""
    lower: dict[str, bool]
    """Those of `columns` its rows have, each with whether lower is better."""
    values: dict[str, str]
    """Per column of `lower`: the `values_digest` of its `column_values`."""
    violins: dict[str, dict[str, Any] | None]
    """Per column of `lower`: `violin_of` its scores."""
    worst: dict[str, list[int]]
    """For the primary metric of the columns of `lower` (`leaderboard.primary_metric`): the
    positions of its `views.worst_sentences`, in their order."""
    sample: list[int]
    """The positions of its `views.sample_sentences`, in their order."""
    rows: pd.DataFrame
    """The rows of `worst` and `sample`, indexed by position: their keys (uniq_id as text),
    their texts (`src_text`, `ref_text`, `mt_text`, those the file has), and the columns of
    `lower`."""

    def worst_rows(self, column: str) -> pd.DataFrame:
        """`views.worst_sentences` of its rows on `column`."""
        return self.rows.loc[self.worst[column], [*SENTENCE_KEY, column]]

    def sample_rows(self) -> pd.DataFrame:
        """`views.sample_sentences` of its rows."""
        return self.rows.loc[self.sample, SENTENCE_KEY]

    def write(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        described = {
            "sentences": self.sentences,
            "columns": self.columns,
            "lower": self.lower,
            "values": self.values,
            "violins": {column: _to_json(v) for column, v in self.violins.items()},
            "worst": self.worst,
            "sample": self.sample,
        }
        table = pa.Table.from_pandas(self.rows.reset_index(names=POSITION), preserve_index=False)
        metadata = {**(table.schema.metadata or {}), METADATA_KEY: json.dumps(described).encode()}
        with atomic_path(path) as temporary:
            pq.write_table(table.replace_schema_metadata(metadata), temporary)

    @classmethod
    def read(cls, path: Path) -> ReportExtract:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        described = json.loads((table.schema.metadata or {})[METADATA_KEY])
        return cls(
            sentences=described["sentences"],
            columns=described["columns"],
            lower=described["lower"],
            values=described["values"],
            violins={column: _from_json(v) for column, v in described["violins"].items()},
            worst=described["worst"],
            sample=described["sample"],
            rows=table.to_pandas().set_index(POSITION).rename_axis(None),
        )


def model_extract(
    path: Path, columns: Sequence[str], lower: set[str] | frozenset[str]
) -> ReportExtract:
    """A model's `ReportExtract` from its scored_rows.parquet at `path`, for the score
    `columns` (`lower`: those where lower is better)."""
    import pyarrow.parquet as pq

    available = set(pq.read_schema(path).names)
    covered = [c for c in columns if c in available]
    # As the report reads them without extracts (`leaderboard.ModelResults.rows`).
    rows = pd.read_parquet(path, columns=[*SENTENCE_KEY, *covered])
    # The leaderboard ranks by, and the sentences page shows the worst on, the primary metric
    # of the columns every model has: with the same metrics for every model, this one.
    primary = primary_metric(covered) if covered else None
    worst = (
        {}
        if primary is None
        else {primary: worst_sentences(rows, primary, primary in lower, WORST_SENTENCES)}
    )
    sample = sample_sentences(rows)
    chosen = [*(w.index.to_numpy() for w in worst.values()), sample.index.to_numpy()]
    positions = np.unique(np.concatenate(chosen)).astype(np.int64)
    sentences, texts = scan_texts(path, positions)
    kept = rows.loc[positions, SENTENCE_KEY].astype({"uniq_id": str})
    return ReportExtract(
        sentences=sentences,
        columns=list(columns),
        lower={c: c in lower for c in covered},
        values={c: values_digest(column_values(path, c)) for c in covered},
        violins={c: violin_of(rows[c]) for c in covered},
        worst={c: [int(p) for p in w.index] for c, w in worst.items()},
        sample=[int(p) for p in sample.index],
        rows=pd.concat([kept, texts, rows.loc[positions, covered]], axis=1),
    )


class ExtractBuilder:
    """A model's `ReportExtract` made while its rows stream past a direction at a time, in the
    order of its scored_rows.parquet: the aggregation, which writes that file from the scored
    files, makes it from the rows it holds, texts included, instead of reading the file's
    texts back. The same extract as `model_extract` of the file it writes, to the bit: the
    same choice of sentences (the worst of each direction on the primary metric; the sample,
    from the same shuffle of every row, as `views.sample_sentences` draws it), digests and
    violins."""

    def __init__(
        self,
        rows: int,
        names: Sequence[str],
        columns: Sequence[str],
        lower: set[str] | frozenset[str],
        seed: int = 0,
    ) -> None:
        """`rows`: how many the file will hold; `names`: its columns."""
        self.columns = list(columns)
        self.covered = [c for c in columns if c in names]
        self.lower = {c: c in lower for c in self.covered}
        self.primary = primary_metric(self.covered) if self.covered else None
        self.texts = text_columns(names)
        self.digest = SentencesDigest(names)
        # `views.sample_sentences`' shuffle of every row (pandas' `sample(frac=1.0)`): a
        # direction's sample is its row that comes first in it.
        self.rank = np.empty(rows, dtype=np.int64)
        self.rank[np.random.RandomState(seed).permutation(rows)] = np.arange(rows)
        self.values: dict[str, list[np.ndarray]] = {c: [] for c in self.covered}
        self.worst: list[int] = []
        self.sample: list[int] = []
        self.chosen: list[Any] = []
        """The arrow tables of the chosen rows (converted once, at the end)."""
        self.positions: list[np.ndarray] = []
        self.pending: list[Any] = []
        """Directions not yet gone through: they are taken many at a time, each arrow call
        made once for many directions rather than once for each."""

    def add(self, table: Any) -> None:
        """The next direction's rows, an arrow table with the file's columns."""
        self.pending.append(table)
        if sum(part.num_rows for part in self.pending) >= CHUNK_ROWS:
            self._take_pending()

    def _take_pending(self) -> None:
        import pyarrow as pa

        directions = [part for part in self.pending if part.num_rows]
        self.pending = []
        if not directions:
            return
        # One contiguous array per column: each hash and take is then one pass, not a pass per
        # direction.
        chunk = pa.concat_tables(directions).combine_chunks()
        start = self.digest.rows
        self.digest.add(chunk)
        scores = {c: np.asarray(chunk.column(c), dtype=float) for c in self.covered}
        for column, values in scores.items():
            self.values[column].append(values)
        bounds = np.cumsum([0, *(part.num_rows for part in directions)])
        chosen: list[np.ndarray] = []
        for first, end in itertools.pairwise(bounds.tolist()):
            if self.primary is not None:
                primary = scores[self.primary][first:end]
                usable = np.flatnonzero(~np.isnan(primary))
                key = -primary[usable] if self.lower[self.primary] else primary[usable]
                worst = first + usable[np.argsort(key, kind="stable")[:WORST_SENTENCES]]
                self.worst += (worst + start).tolist()
                chosen.append(worst)
            sample = first + int(np.argmin(self.rank[start + first : start + end]))
            self.sample.append(start + sample)
            chosen.append(np.array([sample]))
        taken = np.unique(np.concatenate(chosen)).astype(np.int64)
        self.chosen.append(chunk.select([*SENTENCE_KEY, *self.texts]).take(pa.array(taken)))
        self.positions.append(taken + start)

    def extract(self) -> ReportExtract:
        self._take_pending()
        if self.digest.rows != len(self.rank):
            raise ValueError(f"{self.digest.rows} rows streamed, {len(self.rank)} announced")
        import pyarrow as pa

        values = {c: np.concatenate(v) if v else np.array([]) for c, v in self.values.items()}
        positions = np.concatenate(self.positions) if self.positions else np.array([], int)
        rows = (
            pa.concat_tables(self.chosen).to_pandas()
            if self.chosen
            else pd.DataFrame(columns=[*SENTENCE_KEY, *self.texts])
        )
        rows = rows.astype({"uniq_id": str}).set_axis(positions)
        for column, vector in values.items():
            rows[column] = vector[positions]
        worst = {} if self.primary is None else {self.primary: self.worst}
        return ReportExtract(
            sentences=self.digest.hexdigest(),
            columns=self.columns,
            lower=self.lower,
            values={c: values_digest(v) for c, v in values.items()},
            violins={c: violin_of(pd.Series(v)) for c, v in values.items()},
            worst=worst,
            # In the shuffle's order, as `views.sample_sentences` lists them.
            sample=sorted(self.sample, key=lambda position: self.rank[position]),
            rows=rows[[*SENTENCE_KEY, *self.texts, *self.covered]],
        )


Violins = dict[str, dict[str, dict[str, Any] | None]]
"""Per score column, per model: its `violin_of`."""


def from_extracts(
    extracts: Mapping[str, ReportExtract],
    scored_rows: Mapping[str, Path],
    models: Sequence[str],
    columns: Sequence[str],
    primary: str,
    lower: bool,
) -> tuple[Violins, dict[str, Any]] | None:
    """The distributions' violins of `columns` and the sentences page's data
    (`views.sentences_json` on `primary`, `lower` if lower is better) of `models`, in that
    order, from their extracts and, of their `scored_rows`, their scores on `primary` and the
    first model's sources and references of the page's sentences. None, with the reason
    logged, where the extracts cannot give what the rows would (see the module docstring)."""
    first = extracts[models[0]]
    for model in models:
        extract = extracts[model]
        reason = (
            "its sentences are not the first model's, or not in the same order"
            if extract.sentences != first.sentences
            else f"it holds no worst sentences on {primary}"
            if extract.lower.get(primary) != lower or primary not in extract.worst
            else "it was not asked for every score column"
            if not set(columns) <= set(extract.columns)
            else None
        )
        if reason:
            log.info(
                "the report is made from the rows: %s's extract does not serve: %s", model, reason
            )
            return None
    violins: Violins = {
        column: {m: extracts[m].violins[column] for m in models if column in extracts[m].lower}
        for column in columns
    }
    worst = {model: extracts[model].worst_rows(primary) for model in models}
    sample = first.sample_rows()
    wanted = wanted_sentences(worst, sample)
    positions = wanted.index.to_numpy()
    base = wanted.reset_index(drop=True)
    # Every model's extract has the same texts at a position: each gives those of its rows.
    held = pd.concat([extracts[m].rows for m in models])
    held = held[~held.index.duplicated()]
    for name in SENTENCE_TEXTS:
        if name in held:
            base[name] = held[name].reindex(positions).to_numpy()
    for model in models:
        scores = column_values(scored_rows[model], primary)
        if values_digest(scores) != extracts[model].values[primary]:
            log.warning(
                "the report is made from the rows: %s's %s scores are not those of its "
                "extract (made before its scores changed?)",
                model,
                primary,
            )
            return None
        rows = extracts[model].rows
        if "mt_text" in rows:
            base[f"mt|{model}"] = rows["mt_text"].reindex(positions).to_numpy()
        base[f"score|{model}"] = scores[positions]
    log.info("the distributions and the sentences pages made from the models' extracts")
    return violins, sentences_json(worst, sample, base, models, primary, lower)
