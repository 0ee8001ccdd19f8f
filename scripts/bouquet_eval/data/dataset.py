"""The BOUQuET dataset: where its files are, which directions exist, and reading one direction.

The benchmark configurations hold one parquet file per direction, named `<src>-<tgt>.parquet`,
either in the Hugging Face dataset repository or in a local copy of that layout; a folder that
`datasets`' save_to_disk wrote is laid out so (`bouquet_eval.data.saved`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.core.config import ConfigError, expand_path
from bouquet_eval.core.languages import split_direction
from bouquet_eval.data import hub
from bouquet_eval.data.saved import SavedTable, is_saved_by_datasets, saved_layout, write_layout

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

REQUIRED_COLUMNS = ("src_lang", "tgt_lang", "src_text", "tgt_text", "uniq_id")

# Where each supported configuration keeps its per-direction files inside the repository.
HUB_LAYOUT = {
    "benchmark_sentence_level": "benchmark_data/sentence_level",
    "benchmark_paragraph_level": "benchmark_data/paragraph_level",
}


def without_the_hub() -> str:
    """What else a user can do when the dataset cannot be had from the Hub."""
    from bouquet_eval.core.home import local_dataset_hint

    return (
        "(a gated dataset such as facebook/bouquet needs a token, HF_TOKEN, of an account that "
        f"accepted its conditions). Without the Hub, {local_dataset_hint()}"
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
    listed: tuple[str, ...] | None = None
    """The names of the folder's files, when they are yet to be downloaded or written into
    `root` (`resolve_dataset(prepare=False)`, then `prepare_dataset`): as the Hub listed them,
    or as the directions of a table saved by `datasets` name them."""
    saved: SavedTable | None = None
    """The table saved by `datasets` that `root` is to lay out, until it is written."""

    def file(self, direction: Direction) -> Path:
        return self.root / f"{direction.name}.parquet"

    def directions(self) -> list[Direction]:
        """Every direction that has a file, sorted."""
        names = (
            self.listed
            if self.listed is not None
            else [p.name for p in self.root.glob("*.parquet")]
        )
        found = []
        for name in names:
            if not name.endswith(".parquet"):
                continue
            try:
                found.append(Direction.parse(name.removesuffix(".parquet")))
            except ValueError as error:
                raise ConfigError(f"dataset file {self.root / name}: {error}") from None
        if not found:
            raise ConfigError(f"dataset folder {self.root} holds no <src>-<tgt>.parquet files")
        return sorted(found)

    def check_files(
        self, directions: Sequence[Direction], index: Path | None = None
    ) -> dict[str, Any]:
        """Check, before anything runs, that each direction's file is a parquet file with the
        BOUQuET columns, their types, at least one sentence and usable rows (see `_read_checked`),
        and that all of them give uniq_id one type; raise one ConfigError naming every file at
        fault.

        `index` (a JSON file) remembers files already checked, by their size and modification
        time, and the type of their uniq_id, so that planning a large run reads only the files
        that changed. It is read, never written here: the index of the files as they are now is
        returned, for the caller to write once it may write.
        """
        known = _read_index(index)
        kinds: dict[Path, str] = {}
        problems = []
        for direction in directions:
            path = self.file(direction)
            try:
                kinds[path] = _checked_id_kind(path, direction, known)
            except FileNotFoundError:
                problems.append(f"dataset file {path} not found (direction {direction})")
            except DatasetError as error:
                problems.append(str(error))
        mixed = _mixed_id_kinds(kinds)
        if mixed is not None:
            problems.append(mixed)
        if problems:
            shown = problems[:10] + ([f"... and {len(problems) - 10} more"] * (len(problems) > 10))
            raise ConfigError("\n".join(shown))
        return known

    def load(self, direction: Direction, limit: int | None = None) -> pd.DataFrame:
        """Read one direction's sentences, checked as `check_files` checks them (a file may
        change after the run was planned)."""
        path = self.file(direction)
        if not path.is_file():
            raise FileNotFoundError(f"dataset file {path} not found (direction {direction})")
        frame = _read_checked(path, direction).to_pandas()
        if limit is not None:
            frame = frame.head(limit)
        return frame.reset_index(drop=True)


class DatasetError(ValueError):
    """A dataset file that cannot be evaluated; the message names the file, and the row (counted
    from 1) where one is at fault. Not the translator's failure, though a job may meet it while
    the translator runs."""


def _read_checked(path: Path, direction: Direction, columns: list[str] | None = None) -> pa.Table:
    """The file's table (all columns, or only `columns`), once its metadata and its rows show it
    usable: the BOUQuET columns and their types, at least one row, no missing value, the
    languages of the file's name, and no uniq_id twice. Raises DatasetError otherwise."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # One ParquetFile serves the metadata and the rows: several times faster than read_table
    # (dataset machinery) for the many small files a plan checks.
    try:
        with pq.ParquetFile(path) as parquet:
            _check_metadata(path, parquet.metadata)
            # Pandas metadata, as read_table reads them: a stored index is no column.
            table = parquet.read(columns=columns, use_pandas_metadata=True)
    except (pa.ArrowException, OSError) as error:
        raise DatasetError(f"dataset file {path}: not a readable parquet file ({error})") from None
    _check_rows(path, direction, table)
    return table


def _checked_id_kind(path: Path, direction: Direction, known: dict[str, Any]) -> str:
    """The kind of the file's uniq_id, from `known` (the index) while the file is as it was
    checked, else from checking the file (and then remembered in `known`)."""
    status = path.stat()
    stamp = [status.st_size, status.st_mtime_ns]
    entry = known.get(str(path))
    # An entry of an older index (a bare stamp) was checked without the row checks.
    if isinstance(entry, dict) and entry.get("stamp") == stamp and entry.get("uniq_id"):
        return str(entry["uniq_id"])
    table = _read_checked(path, direction, list(REQUIRED_COLUMNS))
    kind = _id_kind(table.schema.field("uniq_id").type)
    known[str(path)] = {"stamp": stamp, "uniq_id": kind}
    return kind


def _check_metadata(path: Path, metadata: pq.FileMetaData) -> None:
    """Raise DatasetError if the file's metadata show it unusable, before any row is read."""
    import pyarrow as pa

    schema = metadata.schema.to_arrow_schema()
    missing = [column for column in REQUIRED_COLUMNS if column not in schema.names]
    if missing:
        raise DatasetError(f"dataset file {path}: missing column(s) {', '.join(missing)}")
    for column in REQUIRED_COLUMNS:
        kind = _value_type(schema.field(column).type)
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and not (
            column == "uniq_id" and pa.types.is_integer(kind)
        ):
            wanted = "text or integers" if column == "uniq_id" else "text"
            raise DatasetError(f"dataset file {path}: column {column} holds {kind}, not {wanted}")
    if metadata.num_rows == 0:
        raise DatasetError(f"dataset file {path}: no sentences (0 rows); remove the file or fix it")


def _check_rows(path: Path, direction: Direction, table: pa.Table) -> None:
    """Raise DatasetError naming the first row at fault: a missing value, a language other
    than the file name's, or a uniq_id seen before (scores are joined on it)."""
    import pyarrow.compute as pc

    values = {column: _decoded(table.column(column)) for column in REQUIRED_COLUMNS}
    for column, column_values in values.items():
        position = pc.index(pc.is_null(column_values), True).as_py()
        if position >= 0:
            raise DatasetError(f"dataset file {path}, {_row(position)}: {column} is missing")
    for column, expected in (("src_lang", direction.src_lang), ("tgt_lang", direction.tgt_lang)):
        position = pc.index(pc.not_equal(values[column], expected), True).as_py()
        if position >= 0:
            raise DatasetError(
                f"dataset file {path}, {_row(position)}: {column} is "
                f"'{values[column][position].as_py()}', expected '{expected}' from the file name"
            )
    _check_unique_ids(path, values["uniq_id"])


def _check_unique_ids(path: Path, ids: pa.ChunkedArray) -> None:
    import pyarrow.compute as pc

    # Counting is fast; only a file with a repeat is walked to find where.
    if pc.count_distinct(ids).as_py() == len(ids):
        return
    first_seen: dict[object, int] = {}
    for position, value in enumerate(ids.to_pylist()):
        if value in first_seen:
            raise DatasetError(
                f"dataset file {path}, {_row(position)}: uniq_id {value!r} appears more than "
                f"once in the direction (also at {_row(first_seen[value])})"
            )
        first_seen[value] = position


def _row(position: int) -> str:
    # Rows count from 1, as lines of a translations file do in their messages.
    return f"row {position + 1}"


def _value_type(kind: pa.DataType) -> pa.DataType:
    """The type of the values, also of a dictionary-encoded column (pandas categories)."""
    import pyarrow as pa

    return kind.value_type if pa.types.is_dictionary(kind) else kind


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    # Compute functions such as count_distinct have no kernel for dictionary-encoded columns.
    return column.cast(_value_type(column.type))


def _id_kind(kind: pa.DataType) -> str:
    import pyarrow as pa

    return "integers" if pa.types.is_integer(_value_type(kind)) else "text"


def _mixed_id_kinds(kinds: Mapping[Path, str]) -> str | None:
    """A message naming a file whose uniq_id is of another kind than the other files': the
    aggregate concatenates the rows of all directions, and cannot mix text and integers."""
    by_kind: dict[str, list[Path]] = {}
    for path, kind in kinds.items():
        by_kind.setdefault(kind, []).append(path)
    if len(by_kind) < 2:
        return None
    # The odd ones out are the files of the rarer kind; on a tie, those of integers, as
    # BOUQuET's own uniq_id is text.
    common, odd = sorted(by_kind, key=lambda kind: (len(by_kind[kind]), kind == "text"))[::-1]
    named, *others = by_kind[odd]
    more = f" (and {len(others)} more file(s) like it)" if others else ""
    return (
        f"dataset file {named}{more}: column uniq_id holds {odd}, but {common} in the other "
        f"{len(by_kind[common])} selected file(s), such as {by_kind[common][0]}; all files must "
        "give uniq_id one type"
    )


def _read_index(index: Path | None) -> dict[str, Any]:
    if index is None:
        return {}
    try:
        known = json.loads(index.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return known if isinstance(known, dict) else {}


def resolve_dataset(
    settings: dict[str, Any], *, fetch: bool = True, prepare: bool = True
) -> DatasetSource:
    """Find the dataset's files: a local folder (of parquet files, or one that `datasets`'
    save_to_disk wrote, see `bouquet_eval.data.saved`), or the hub snapshot at the configured
    revision.

    From the hub, `fetch=True` resolves the revision on the Hub (a branch that moved is
    noticed) and, with `prepare`, downloads what the cache lacks; without `prepare` only the
    Hub's listing is read. A folder saved by `datasets` is laid out per direction where
    `fetch` and `prepare`; without `prepare` only its table is read. Without `prepare` nothing
    is written (`prepare_dataset` downloads or lays out later: the workflow plans this way
    while Snakemake parses it). `fetch=False` reads only the local cache or the layout, as the
    workflow's jobs do once its main process has made them (see `bouquet_eval.data.hub`).
    """
    if settings.get("path"):
        root = expand_path(settings["path"])
        if root.is_file():
            raise ConfigError(f"dataset.path: '{root}' is a file, not a folder", "dataset.path")
        if not root.is_dir():
            raise ConfigError(f"dataset.path: directory '{root}' not found", "dataset.path")
        if is_saved_by_datasets(root):
            split = settings.get("split", "test")
            layout, identity, names, saved = saved_layout(root, split, fetch=fetch, write=prepare)
            return DatasetSource(layout, identity, names, saved)
        return DatasetSource(root.resolve(), {"path": str(root.resolve())})
    return _hub_snapshot(settings, fetch, prepare)


def _hub_snapshot(settings: dict[str, Any], fetch: bool, download: bool) -> DatasetSource:
    subdir = f"{HUB_LAYOUT[settings['config']]}/{settings['split']}"
    name, revision = settings["name"], settings["revision"]
    what = f"dataset {name}@{revision} ({settings['config']}, {settings['split']})"
    no_folder = ConfigError(f"{what}: the repository has no {subdir}/ folder at that revision")
    listed = None
    if fetch and not download:
        located = hub.locate(
            name, "dataset", revision, subdir, what=what, otherwise=without_the_hub()
        )
        if located is not None and not located.names:
            raise no_folder
        if located is not None:
            snapshot, listed = located.snapshot, located.names
        fetch = False  # the Hub could not be asked: the cache is read as it is
    if listed is None:
        snapshot = hub.snapshot(
            name,
            "dataset",
            revision,
            [f"{subdir}/*.parquet"],
            fetch=fetch,
            what=what,
            otherwise=without_the_hub(),
        )
        if not (snapshot / subdir).is_dir():
            raise no_folder
    identity = {
        "name": name,
        "config": settings["config"],
        "split": settings["split"],
        "revision": revision,
        # The snapshot folder is named after the commit the revision resolved to.
        "commit": snapshot.name,
    }
    return DatasetSource(snapshot / subdir, identity, listed)


def prepare_dataset(source: DatasetSource) -> None:
    """Make the files of a dataset resolved without them (`resolve_dataset(prepare=False)`):
    download what the cache lacks of a dataset on the Hub, or lay out a table saved by
    `datasets`; nothing for a dataset whose files are there. ConfigError when the dataset
    changed since it was resolved (the revision moved on the Hub, the table was saved again):
    the plan was made for what it was then."""
    if source.listed is None:
        return
    if source.saved is not None:
        write_layout(source.saved, source.root)
        return
    identity = source.identity
    settings = {key: identity[key] for key in ("name", "config", "split", "revision")}
    fetched = _hub_snapshot(settings, fetch=True, download=True)
    if fetched.identity["commit"] != identity["commit"]:
        raise ConfigError(
            f"dataset {identity['name']}@{identity['revision']} moved on the Hub from commit "
            f"{identity['commit']} to {fetched.identity['commit']} while the run was planned: "
            "start it again"
        )


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


def _absent_languages(codes: Sequence[str]) -> str:
    # Codes are well-formed by now (the schema checks them): the dataset lacks them.
    return f"no direction of the dataset has language code(s) {list(codes)}"


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
    for label, key, languages in (
        ("src_filter (directions.src_langs)", "directions.src_langs", src_filter),
        ("tgt_filter (directions.tgt_langs)", "directions.tgt_langs", tgt_filter),
    ):
        absent = [code for code in languages if code not in known_languages]
        if absent:
            raise ConfigError(f"{label}: {_absent_languages(absent)}", key)
    chosen = available
    if directions:
        available_set = set(available)
        chosen = []
        for index, given in enumerate(directions):
            direction = as_direction(given)
            if direction not in available_set:
                absent = sorted(
                    code
                    for code in (direction.src_lang, direction.tgt_lang)
                    if code not in known_languages
                )
                detail = _absent_languages(absent) if absent else "not in the dataset"
                raise ConfigError(
                    f"directions (directions.list): '{direction}': {detail}",
                    f"directions.list[{index}]",
                )
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
