"""Tables of human judgements: reading one, checking every row, and Met-BOUQuET's place.

A table has one row per judged translation: the direction's two languages, the source text, the
machine translation, optionally a reference, the system that made it, the human score and
optionally a segment id (the same for every system's translation of one source sentence). The
configuration's `metaeval.columns` maps these fields to the table's column names; the defaults
are Met-BOUQuET's names as docs/metaeval.md assumes them.

Everything is checked before any job starts, and a fault is named by file, row (counted from 1,
the header not counted) and field: a missing column, a missing or non-numeric score, a
malformed language code or a direction the dataset lacks, a missing text, and one system's
segment judged twice.

Met-BOUQuET is read through the Hugging Face cache, and the workflow writes nothing while
Snakemake parses it: its main process asks the Hub which commit the revision is and which files
it holds there (`met_bouquet_files`), reads them from the cache where it holds them, else from
the Hub into memory (the judged systems decide the plan's jobs), and downloads them into the
cache once Snakemake plans the run (`download_judgements`), before any job reads them there.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.core.config import ConfigError, expand_path
from bouquet_eval.core.io import write_jsonl, write_parquet
from bouquet_eval.core.languages import LanguageCode
from bouquet_eval.core.names import FolderNames, UnsafeName, refusal
from bouquet_eval.data import hub
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.outputs import translation_path

if TYPE_CHECKING:
    import pandas as pd

MET_BOUQUET = "met-bouquet"
"""The `metaeval.judgements` value that names Met-BOUQuET."""

# Met-BOUQuET's layout as this workflow assumes it (docs/metaeval.md, "Met-BOUQuET"): parquet
# files in one folder of the dataset's repository, with the columns of DEFAULT_COLUMNS. The
# dataset card names Met-BOUQuET without describing its files; a repository that differs is
# named by `met_bouquet_files` and `check_judgements`.
MET_BOUQUET_REPOSITORY = "facebook/bouquet"
MET_BOUQUET_FOLDER = "met_bouquet"
# The Hub matches patterns with fnmatch, whose `*` also matches `/`: files at any depth.
MET_BOUQUET_PATTERN = f"{MET_BOUQUET_FOLDER}/*.parquet"
LOCAL_COPY = "; or set metaeval.judgements to a local copy of the table"
"""What else a user can do when Met-BOUQuET cannot be had from the Hub."""

FIELDS: tuple[str, ...] = ("src_lang", "tgt_lang", "source", "translation", "reference")
FIELDS += ("system", "score", "segment")
"""The fields of a judged translation, each the name of a `metaeval.columns` key."""
OPTIONAL_FIELDS = ("reference", "segment")
TEXT_FIELDS = ("source", "translation", "reference", "system")

COLUMNS = ("src_lang", "tgt_lang", "src_text", "mt_text", "ref_text", "system", "human", "segment")
"""The columns of a checked table (`check_judgements`), in the order of FIELDS."""

TABLE_SUFFIXES = {
    ".parquet": "parquet",
    ".csv": "csv",
    ".tsv": "tsv",
    ".jsonl": "jsonl",
    ".json": "jsonl",
}


class JudgementError(ConfigError):
    """A judgement table that cannot be used; the message names the file, row and field."""


@dataclass(frozen=True)
class JudgementSource:
    """Where a run's judgements are and how their columns are named."""

    files: tuple[Path, ...]
    columns: Mapping[str, str | None]
    higher_is_better: bool
    identity: Mapping[str, Any]
    """What the judgements are, for the manifest: a path, or Met-BOUQuET's revision and commit."""
    assumed_layout: bool = False
    """Whether the column names are Met-BOUQuET's as assumed (messages then say so)."""
    downloads_into: Path | None = None
    """Met-BOUQuET's folder in the Hugging Face cache at its commit, while its `files` are yet
    to be downloaded there (`download_judgements`); until then they are read from the Hub."""

    def load(self, known_directions: Iterable[Direction] | None = None) -> pd.DataFrame:
        """Every file's rows, checked (`check_judgements`), in one table."""
        import pandas as pd

        frames = []
        for path in self.files:
            frame, named = self._read(path)
            frames.append(
                check_judgements(
                    frame,
                    named,
                    self.columns,
                    known_directions,
                    self.higher_is_better,
                    self.assumed_layout,
                )
            )
        table = pd.concat(frames, ignore_index=True)
        _check_repeats(table)
        return table

    def _read(self, path: Path, columns: Sequence[str] | None = None) -> tuple[pd.DataFrame, str]:
        """One file's table (`columns` of it, where given) and its name for messages: the file,
        or its address on the Hub while it is read from there, into memory."""
        if self.downloads_into is None or path.is_file():
            return read_table(path, columns), str(path)
        name = path.relative_to(self.downloads_into).as_posix()
        commit = self.downloads_into.name
        content = hub.read_file(
            MET_BOUQUET_REPOSITORY,
            "dataset",
            commit,
            name,
            what=f"Met-BOUQuET ({MET_BOUQUET_REPOSITORY}@{commit}, {name})",
            otherwise=LOCAL_COPY,
        )
        address = f"hf://datasets/{MET_BOUQUET_REPOSITORY}@{commit}/{name}"
        return read_table(path, columns, content), address

    def planned_rows(self) -> pd.DataFrame:
        """Only what planning needs, unchecked: each row's system, src_lang and tgt_lang, read
        from the files' three columns. For the processes of jobs, whose main process has
        checked the whole table (`load`) before starting any of them."""
        import pandas as pd

        fields = ("system", "src_lang", "tgt_lang")
        names = [str(self.columns[field]) for field in fields]
        frames = []
        for path in self.files:
            frame, named = self._read(path, names)
            frames.append(
                frame[names]
                .set_axis(fields, axis=1)
                .assign(file=named, row=range(1, len(frame) + 1))
            )
        return pd.concat(frames, ignore_index=True)


def resolve_judgements(
    settings: Mapping[str, Any], home: Mapping[str, str] | None = None, *, fetch: bool = True
) -> JudgementSource | None:
    """The judgements `metaeval` names, None when none are; Met-BOUQuET through the Hub cache."""
    given = settings["judgements"]
    if given is None:
        return None
    columns = dict(settings["columns"])
    higher = bool(settings["higher_is_better"])
    if given == MET_BOUQUET:
        revision = settings["revision"]
        files, commit, downloads_into = met_bouquet_files(revision, fetch=fetch)
        identity = {
            "name": MET_BOUQUET_REPOSITORY,
            "files": MET_BOUQUET_PATTERN,
            "revision": revision,
            "commit": commit,
        }
        return JudgementSource(
            tuple(files),
            columns,
            higher,
            identity,
            assumed_layout=True,
            downloads_into=downloads_into,
        )
    path = expand_path(given, home)
    if not path.is_file():
        raise ConfigError(f"metaeval.judgements: file '{path}' not found", "metaeval.judgements")
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise ConfigError(
            f"metaeval.judgements: '{path}' is not a table this workflow reads: name it "
            f"{', '.join(TABLE_SUFFIXES)}",
            "metaeval.judgements",
        )
    return JudgementSource((path,), columns, higher, {"path": str(path.resolve())})


def met_bouquet_files(revision: str, *, fetch: bool) -> tuple[list[Path], str, Path | None]:
    """Met-BOUQuET's parquet files at `revision` in the Hub cache, the commit the revision
    resolved to, and the cache folder of that commit while the files are yet to be downloaded
    there (`download_judgements`), else None. Nothing is written.

    `fetch=True` asks the Hub which commit the revision is and which files it holds there, and
    reads the cache as it is where the Hub cannot be asked; `fetch=False` reads only the cache
    (a job, once the workflow's main process has downloaded them). A repository without the
    assumed folder is named with what it holds instead."""
    what = f"Met-BOUQuET ({MET_BOUQUET_REPOSITORY}@{revision}, {MET_BOUQUET_PATTERN})"
    located = None
    if fetch:
        located = hub.locate(
            MET_BOUQUET_REPOSITORY,
            "dataset",
            revision,
            MET_BOUQUET_FOLDER,
            what=what,
            otherwise=LOCAL_COPY,
            recursive=True,
        )
    downloads_into = None
    if located is None:
        snapshot = hub.snapshot(
            MET_BOUQUET_REPOSITORY,
            "dataset",
            revision,
            [MET_BOUQUET_PATTERN],
            fetch=False,
            what=what,
            otherwise=LOCAL_COPY,
        )
        files = sorted((snapshot / MET_BOUQUET_FOLDER).rglob("*.parquet"))
    else:
        snapshot = located.snapshot
        folder = snapshot / MET_BOUQUET_FOLDER
        files = sorted(folder / name for name in located.names if name.endswith(".parquet"))
        if not all(path.is_file() for path in files):
            downloads_into = snapshot
    if not files:
        holds = (
            _repository_folders(revision, snapshot.name)
            if located is not None
            else "(not listed offline)"
        )
        raise ConfigError(
            f"{what}: no parquet files under {MET_BOUQUET_FOLDER}/ at commit {snapshot.name}: the "
            f"layout docs/metaeval.md assumes differs from the repository, which holds {holds}; "
            "download the judgements and set metaeval.judgements to the file, with "
            "metaeval.columns naming its columns",
            "metaeval.judgements",
        )
    return files, snapshot.name, downloads_into


def download_judgements(judgements: JudgementSource | None) -> None:
    """Download Met-BOUQuET's files into the Hugging Face cache where the plan read them from
    the Hub (`JudgementSource.downloads_into`); nothing otherwise. ConfigError when the revision
    has moved on the Hub since: the plan was made for the commit it named then."""
    if judgements is None or judgements.downloads_into is None:
        return
    identity = judgements.identity
    revision = identity["revision"]
    snapshot = hub.snapshot(
        MET_BOUQUET_REPOSITORY,
        "dataset",
        revision,
        [MET_BOUQUET_PATTERN],
        fetch=True,
        what=f"Met-BOUQuET ({MET_BOUQUET_REPOSITORY}@{revision}, {MET_BOUQUET_PATTERN})",
        otherwise=LOCAL_COPY,
    )
    if snapshot.name != identity["commit"]:
        raise ConfigError(
            f"Met-BOUQuET ({MET_BOUQUET_REPOSITORY}@{revision}) moved on the Hub from commit "
            f"{identity['commit']} to {snapshot.name} while the run was planned: start it again"
        )


def _repository_folders(revision: str, commit: str) -> str:
    try:
        from huggingface_hub import HfApi

        names = HfApi().list_repo_files(
            MET_BOUQUET_REPOSITORY, repo_type="dataset", revision=commit
        )
    except Exception as error:  # the listing only improves the message
        return f"files that could not be listed ({type(error).__name__})"
    folders = sorted({name.split("/", 1)[0] for name in names})
    return "top-level entries " + ", ".join(folders[:20])


def read_table(
    path: Path, columns: Sequence[str] | None = None, content: bytes | None = None
) -> pd.DataFrame:
    """A parquet, CSV, TSV or JSON Lines table, every value as stored (CSV cells as text);
    only `columns` where given (JSON Lines is read whole, then cut). `content`: the file's
    bytes, where they were read elsewhere (its name still tells the format)."""
    import pandas as pd

    kind = TABLE_SUFFIXES.get(path.suffix.lower())
    wanted = None if columns is None else list(columns)
    source: Path | io.BytesIO = path if content is None else io.BytesIO(content)
    try:
        if kind == "parquet":
            return pd.read_parquet(source, columns=wanted)
        if kind in ("csv", "tsv"):
            # Text, so that a score such as "n/a" is named rather than turned into NaN.
            return pd.read_csv(
                source,
                sep="," if kind == "csv" else "\t",
                dtype=str,
                keep_default_na=False,
                usecols=wanted,
            )
        if kind == "jsonl":
            whole = pd.read_json(source, lines=True, dtype=False)
            return whole if wanted is None else whole[wanted]
    except (ValueError, OSError) as error:
        raise JudgementError(
            f"judgements file {path}: not a readable {kind} table ({error})"
        ) from None
    raise JudgementError(f"judgements file {path}: unknown table format {path.suffix!r}")


def check_judgements(
    frame: pd.DataFrame,
    path: Path | str,
    columns: Mapping[str, str | None],
    known_directions: Iterable[Direction] | None = None,
    higher_is_better: bool = True,
    assumed_layout: bool = False,
) -> pd.DataFrame:
    """The table's judgements in the columns of `COLUMNS`, `human` oriented so that higher is
    better; JudgementError names the first fault by file, row and field."""
    import pandas as pd

    mapped = {field: columns.get(field) for field in FIELDS}
    absent = [
        f"{field} (column '{name}')"
        for field, name in mapped.items()
        if name is not None and name not in frame.columns
    ]
    if absent:
        layout = (
            " Met-BOUQuET's files differ from the layout docs/metaeval.md assumes; map their "
            "columns with metaeval.columns."
            if assumed_layout
            else " Name the table's columns with metaeval.columns.<field>."
        )
        raise JudgementError(
            f"judgements file {path}: missing {', '.join(absent)}; the table has "
            f"{', '.join(map(str, frame.columns)) or 'no columns'}.{layout}"
        )
    if frame.empty:
        raise JudgementError(f"judgements file {path}: no rows")
    values: dict[str, list[Any]] = {
        field: frame[name].tolist() for field, name in mapped.items() if name is not None
    }
    where = _Locator(path, mapped)
    for field in TEXT_FIELDS:
        for position, value in enumerate(values.get(field, ())):
            if not isinstance(value, str) or (field == "system" and not value.strip()):
                where.fail(position, field, f"is {_shown(value)}, not text")
    for position, value in enumerate(values["system"]):
        if (reason := refusal(value)) is not None:
            where.fail(
                position, "system", f"{_shown(value)} {reason}: a judged system's name names files"
            )
    scores = [where.number(position, value) for position, value in enumerate(values["score"])]
    directions = _checked_directions(
        where, values["src_lang"], values["tgt_lang"], known_directions
    )
    segments = values.get("segment") or values["source"]
    for position, value in enumerate(segments):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            where.fail(position, "segment" if "segment" in values else "source", "is missing")
    sign = 1.0 if higher_is_better else -1.0
    table = pd.DataFrame(
        {
            "src_lang": [d.src_lang for d in directions],
            "tgt_lang": [d.tgt_lang for d in directions],
            "src_text": values["source"],
            "mt_text": values["translation"],
            "ref_text": values.get("reference") or [""] * len(frame),
            "system": values["system"],
            "human": [sign * score for score in scores],
            "segment": [str(value) for value in segments],
        },
        columns=list(COLUMNS),
    )
    table["file"] = str(path)
    table["row"] = range(1, len(table) + 1)
    return table


class _Locator:
    """Names a row's field: `judgements file F, row R, field score (column 'xsts')`."""

    def __init__(self, path: Path | str, columns: Mapping[str, str | None]) -> None:
        self.path = path
        self.columns = columns

    def fail(self, position: int, field: str, problem: str) -> None:
        raise JudgementError(
            f"judgements file {self.path}, row {position + 1}, field {field} "
            f"(column '{self.columns[field]}'): {problem}"
        )

    def number(self, position: int, value: Any) -> float:
        """A finite number from a score cell, or the row named."""
        if isinstance(value, bool):
            self.fail(position, "score", f"is {_shown(value)}, not a number")
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number):
            self.fail(position, "score", f"is {_shown(value)}, not a number")
        return number


def _checked_directions(
    where: _Locator,
    sources: Sequence[Any],
    targets: Sequence[Any],
    known: Iterable[Direction] | None,
) -> list[Direction]:
    known_set = None if known is None else set(known)
    parsed: dict[tuple[Any, Any], Direction] = {}
    found = []
    for position, pair in enumerate(zip(sources, targets, strict=True)):
        direction = parsed.get(pair)
        if direction is None:
            for field, code in zip(("src_lang", "tgt_lang"), pair, strict=True):
                try:
                    LanguageCode.parse(code if isinstance(code, str) else "")
                except ValueError as error:
                    where.fail(
                        position,
                        field,
                        str(error)
                        if isinstance(code, str)
                        else f"is {_shown(code)}, not a language code",
                    )
            direction = Direction(*pair)
            if known_set is not None and direction not in known_set:
                where.fail(
                    position,
                    "src_lang",
                    f"direction {direction} is not a direction of the dataset",
                )
            parsed[pair] = direction
        found.append(direction)
    return found


def _check_repeats(table: pd.DataFrame) -> None:
    """One system's translation of one segment is judged once (scores are joined on it)."""
    keys = ["system", "src_lang", "tgt_lang", "segment"]
    repeated = table.duplicated(keys, keep="first")
    if not repeated.any():
        return
    position = int(repeated.to_numpy().nonzero()[0][0])
    row = table.iloc[position]
    first = table[(table[keys] == row[keys]).all(axis=1)].iloc[0]
    raise JudgementError(
        f"judgements file {row['file']}, row {row['row']}, field segment: system '{row['system']}' "
        f"has segment '{row['segment']}' of {row['src_lang']}-{row['tgt_lang']} judged twice "
        f"(also at row {first['row']}); average the judgements into one row"
    )


def _shown(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "missing"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


SYSTEMS_FOLDER = "systems"


@dataclass(frozen=True)
class JudgedSystem:
    """A judged system: its name (data only), the folder name it maps to (for every file,
    log and job of its own), its folder and its directions."""

    name: str
    folder_name: str
    folder: Path
    directions: tuple[Direction, ...]


def judged_systems(
    judgements: JudgementSource,
    known_directions: Iterable[Direction],
    output_dir: Path,
    *,
    check: bool = True,
) -> dict[str, JudgedSystem]:
    """Each judged system by name, its folder <output_dir>/metaeval/systems/<folder name>,
    from the checked table (read, not checked again, where `check` is False: in a job, whose
    main process checked it); a name that cannot name a folder, or two names that map to one
    folder name, are a JudgementError naming the file, row and value."""
    table = judgements.load(known_directions) if check else judgements.planned_rows()
    return {
        name: JudgedSystem(
            name,
            folder,
            output_dir / "metaeval" / SYSTEMS_FOLDER / folder,
            tuple(sorted(directions)),
        )
        for name, (folder, directions) in _system_folders(table).items()
    }


def _system_folders(table: pd.DataFrame) -> dict[str, tuple[str, set[Direction]]]:
    """Each system's folder name and directions, in the order of the names; the rows are
    read in the table's order, so that a name refused is named at its first row."""
    names = FolderNames("judged system")
    found: dict[str, tuple[str, set[Direction]]] = {}
    columns = table[["system", "src_lang", "tgt_lang", "file", "row"]]
    for system, src, tgt, path, row in columns.itertuples(index=False):
        if system not in found:
            where = f"judgements file {path}, row {row}, field system"
            try:
                found[system] = (names.add(system, where), set())
            except UnsafeName as error:
                raise JudgementError(str(error)) from None
        found[system][1].add(Direction(src, tgt))
    return dict(sorted(found.items()))


# Each judged system is a model whose translations are given: for each of its directions,
# `<system folder>/<src>-<tgt>.jsonl` holds its judged translations and
# `<system folder>/dataset/<src>-<tgt>.parquet` their sources, references and segment ids (the
# dataset's columns), so that the workflow's own score jobs score them as any model's. Rows
# keep the table's order within a direction.


def dataset_file(folder: Path, direction: Direction) -> Path:
    return folder / "dataset" / f"{direction}.parquet"


def write_system_inputs(table: pd.DataFrame, system: str, folder: Path) -> list[Path]:
    """Write one system's per-direction translations and sentences; the paths written."""
    import pandas as pd

    written = []
    rows = table[table["system"] == system]
    for (src, tgt), part in rows.groupby(["src_lang", "tgt_lang"], sort=True):
        direction = Direction(str(src), str(tgt))
        sentences = pd.DataFrame(
            {
                "src_lang": part["src_lang"].to_numpy(),
                "tgt_lang": part["tgt_lang"].to_numpy(),
                "src_text": part["src_text"].to_numpy(),
                "tgt_text": part["ref_text"].to_numpy(),
                "uniq_id": part["segment"].to_numpy(),
            }
        )
        translations = sentences.rename(columns={"tgt_text": "ref_text"}).assign(
            mt_text=part["mt_text"].to_numpy()
        )
        for path, write, frame in (
            (dataset_file(folder, direction), write_parquet, sentences),
            (translation_path(folder, direction), write_jsonl, translations),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            write(path, frame)
            written.append(path)
    return written
