"""The BOUQuET dataset: where its files are, which directions exist, and reading one direction.

The benchmark configurations hold one parquet file per direction, named `<src>-<tgt>.parquet`,
either in the Hugging Face dataset repository or in a local copy of that layout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval import hub
from bouquet_eval.config import ConfigError, expand_path
from bouquet_eval.io import write_json
from bouquet_eval.languages import split_direction

if TYPE_CHECKING:
    import pandas as pd

REQUIRED_COLUMNS = ("src_lang", "tgt_lang", "src_text", "tgt_text", "uniq_id")

# Where each supported configuration keeps its per-direction files inside the repository.
HUB_LAYOUT = {
    "benchmark_sentence_level": "benchmark_data/sentence_level",
    "benchmark_paragraph_level": "benchmark_data/paragraph_level",
}
WITHOUT_THE_HUB = (
    "(a gated dataset such as facebook/bouquet needs a token, HF_TOKEN, of an account that "
    "accepted its conditions). Without the Hub, set dataset.path to a folder of "
    "<src>-<tgt>.parquet files, or leave out --configfile to run the bundled sample"
)


@dataclass(frozen=True, order=True)
class Direction:
    src_lang: str
    tgt_lang: str

    @classmethod
    def parse(cls, name: str) -> Direction:
        return cls(*split_direction(name))

    @property
    def name(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DatasetSource:
    """A resolved dataset: a local folder of per-direction parquet files and what it is."""

    root: Path
    identity: dict[str, Any]

    def file(self, direction: Direction) -> Path:
        return self.root / f"{direction.name}.parquet"

    def directions(self) -> list[Direction]:
        """Every direction that has a file, sorted."""
        found = []
        for path in self.root.glob("*.parquet"):
            try:
                found.append(Direction.parse(path.stem))
            except ValueError as error:
                raise ConfigError(f"dataset file {path}: {error}") from None
        if not found:
            raise ConfigError(f"dataset folder {self.root} holds no <src>-<tgt>.parquet files")
        return sorted(found)

    def check_files(self, directions: Sequence[Direction], index: Path | None = None) -> None:
        """Check, before anything runs, that each direction's file is a parquet file with the
        BOUQuET columns, their types, and at least one sentence; raise one ConfigError naming
        every file at fault.

        Only the files' metadata is read; `index` (a JSON file) remembers files already checked
        by their size and modification time, so that planning a large run stays fast.
        """
        known = _read_index(index)
        checked = len(known)
        problems = []
        for direction in directions:
            path = self.file(direction)
            try:
                status = path.stat()
            except FileNotFoundError:
                problems.append(f"dataset file {path} not found (direction {direction})")
                continue
            stamp = [status.st_size, status.st_mtime_ns]
            if known.get(str(path)) == stamp:
                continue
            problem = _file_problem(path)
            if problem is None:
                known[str(path)] = stamp
            else:
                problems.append(problem)
        if index is not None and len(known) != checked:
            write_json(index, known)
        if problems:
            shown = problems[:10] + ([f"... and {len(problems) - 10} more"] * (len(problems) > 10))
            raise ConfigError("\n".join(shown))

    def load(self, direction: Direction, limit: int | None = None) -> pd.DataFrame:
        """Read one direction's sentences, checked against the BOUQuET columns and their types."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = self.file(direction)
        if not path.is_file():
            raise FileNotFoundError(f"dataset file {path} not found (direction {direction})")
        problem = _file_problem(path)
        if problem is not None:
            raise ValueError(problem)
        try:
            frame = pq.read_table(path).to_pandas()
        except (pa.ArrowException, OSError) as error:
            raise ValueError(f"dataset file {path}: cannot be read as parquet ({error})") from None
        for column, expected in (
            ("src_lang", direction.src_lang),
            ("tgt_lang", direction.tgt_lang),
        ):
            wrong = frame.index[frame[column] != expected]
            if len(wrong):
                row = int(wrong[0])
                raise ValueError(
                    f"dataset file {path}, row {row}: {column} is '{frame.at[row, column]}', "
                    f"expected '{expected}' from the file name"
                )
        for column in ("src_text", "tgt_text", "uniq_id"):
            empty = frame.index[frame[column].isna()]
            if len(empty):
                raise ValueError(f"dataset file {path}, row {int(empty[0])}: {column} is missing")
        repeated = frame.index[frame["uniq_id"].duplicated()]
        if len(repeated):
            row = int(repeated[0])
            raise ValueError(
                f"dataset file {path}, row {row}: uniq_id {frame.at[row, 'uniq_id']!r} appears "
                "more than once in the direction"
            )
        if limit is not None:
            frame = frame.head(limit)
        return frame.reset_index(drop=True)


def _file_problem(path: Path) -> str | None:
    """What makes a dataset file unusable, judged from its metadata; None if nothing does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_metadata(path)
        schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as error:
        return f"dataset file {path}: not a readable parquet file ({error})"
    missing = [column for column in REQUIRED_COLUMNS if column not in schema.names]
    if missing:
        return f"dataset file {path}: missing column(s) {', '.join(missing)}"
    for column in REQUIRED_COLUMNS:
        kind = schema.field(column).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        if not (text or (column == "uniq_id" and pa.types.is_integer(kind))):
            wanted = "text or integers" if column == "uniq_id" else "text"
            return f"dataset file {path}: column {column} holds {kind}, not {wanted}"
    if metadata.num_rows == 0:
        return f"dataset file {path}: no sentences (0 rows); remove the file or fix it"
    return None


def _read_index(index: Path | None) -> dict[str, Any]:
    if index is None:
        return {}
    try:
        known = json.loads(index.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return known if isinstance(known, dict) else {}


def resolve_dataset(settings: dict[str, Any], *, fetch: bool = True) -> DatasetSource:
    """Find the dataset's files: a local folder, or the hub snapshot at the configured revision.

    From the hub, `fetch=True` resolves the revision on the Hub (a branch that moved is
    noticed) and downloads what the cache lacks; `fetch=False` reads only the local cache, as
    the workflow's jobs do once its main process has fetched (see `bouquet_eval.hub`).
    """
    if settings.get("path"):
        root = expand_path(settings["path"])
        if not root.is_dir():
            raise ConfigError(f"dataset.path: directory '{root}' not found")
        return DatasetSource(root.resolve(), {"path": str(root.resolve())})
    return _hub_snapshot(settings, fetch)


def _hub_snapshot(settings: dict[str, Any], fetch: bool) -> DatasetSource:
    subdir = f"{HUB_LAYOUT[settings['config']]}/{settings['split']}"
    name, revision = settings["name"], settings["revision"]
    what = f"dataset {name}@{revision} ({settings['config']}, {settings['split']})"
    patterns = [f"{subdir}/*.parquet"]
    snapshot = hub.snapshot(
        name, "dataset", revision, patterns, fetch=fetch, what=what, otherwise=WITHOUT_THE_HUB
    )
    root = snapshot / subdir
    if not root.is_dir():
        raise ConfigError(f"{what}: the repository has no {subdir}/ folder at that revision")
    identity = {
        "name": name,
        "config": settings["config"],
        "split": settings["split"],
        "revision": revision,
        # The snapshot folder is named after the commit the revision resolved to.
        "commit": snapshot.name,
    }
    return DatasetSource(root, identity)


DEFAULT_DATASET = {
    "name": "facebook/bouquet",
    "config": "benchmark_sentence_level",
    "split": "test",
    "revision": "main",
    "path": None,
}
"""BOUQuET on the hub, as the workflow's configuration defaults it."""


def dataset_source(
    dataset: DatasetSource | Mapping[str, Any] | str | os.PathLike[str] | None,
) -> DatasetSource:
    """A resolved source from what a caller may give: a source, a `dataset` section of the
    configuration, a local folder of `<src>-<tgt>.parquet` files, or None for the hub's."""
    if isinstance(dataset, DatasetSource):
        return dataset
    if dataset is None:
        return resolve_dataset(dict(DEFAULT_DATASET))
    if isinstance(dataset, Mapping):
        return resolve_dataset({**DEFAULT_DATASET, **dataset})
    return resolve_dataset({**DEFAULT_DATASET, "path": os.fspath(dataset)})


def as_direction(direction: Direction | str | Sequence[str]) -> Direction:
    """A direction from a `Direction`, a name `<src>-<tgt>` or a pair `(src, tgt)`."""
    if isinstance(direction, Direction):
        return direction
    if isinstance(direction, str):
        return Direction.parse(direction)
    source, target = direction
    return Direction.parse(f"{source}-{target}")


def select_directions(
    available: Iterable[Direction] | None = None,
    *,
    src_filter: Sequence[str] = (),
    tgt_filter: Sequence[str] = (),
    directions: Sequence[Direction | str | Sequence[str]] = (),
    dataset: DatasetSource | Mapping[str, Any] | str | os.PathLike[str] | None = None,
) -> list[Direction]:
    """Directions to evaluate, sorted: every available one, or the `directions` given (names
    or `(src, tgt)` pairs), kept when their source is in `src_filter` and their target in
    `tgt_filter` (an empty filter keeps all).

    `available` defaults to the directions of `dataset` (see `dataset_source`: BOUQuET on the
    hub when not given). Unknown language codes and directions are errors.
    """
    if available is None:
        available = dataset_source(dataset).directions()
    available = sorted(available)
    known_languages = {d.src_lang for d in available} | {d.tgt_lang for d in available}
    for label, languages in (
        ("src_filter (directions.src_langs)", src_filter),
        ("tgt_filter (directions.tgt_langs)", tgt_filter),
    ):
        unknown = [code for code in languages if code not in known_languages]
        if unknown:
            raise ConfigError(f"{label}: unknown language code(s) {unknown}")
    chosen = available
    if directions:
        available_set = set(available)
        chosen = []
        for given in directions:
            direction = as_direction(given)
            if direction not in available_set:
                unknown = sorted(
                    code
                    for code in (direction.src_lang, direction.tgt_lang)
                    if code not in known_languages
                )
                detail = f"unknown language code(s) {unknown}" if unknown else "not in the dataset"
                raise ConfigError(f"directions (directions.list): '{direction}': {detail}")
            chosen.append(direction)
    selected = sorted(
        d
        for d in set(chosen)
        if (not src_filter or d.src_lang in src_filter)
        and (not tgt_filter or d.tgt_lang in tgt_filter)
    )
    if not selected:
        raise ConfigError("directions: the selection holds no direction of the dataset")
    return selected
