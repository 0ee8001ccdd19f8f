"""A received submission (a folder, or a .tar.gz of one), read as data and within limits.

A leaderboard maintainer verifies a submission with their own configuration: the dataset, its
revision, the metrics and their settings, the tolerances. From the submission only three things
are taken: the model's name (the folder's, or the archive's top folder's), `scores.csv`, and the
translation file `<src>-<tgt>.jsonl` of each direction, where each direction `scores.csv` lists
must be a direction of the maintainer's dataset, listed once. Every other file (a `config.yaml`,
a dataset copy, `COMMANDS.txt`) is never opened, and is named as ignored; links, nested folders
and archive members that are not plain files at the top of the folder are never read either.

The model's name is data: it is mapped to a folder name (`core.names`) for the folders, logs
and jobs of its verification. What the submission holds is bounded by `ArchiveLimits`
(`verify.limits`): how many members, how large each and all of them unpacked, how many lines
`scores.csv` has. They are checked from each member's header before the member is read, so
that an archive that would unpack to more is refused as soon as its header is read, whatever
comes after; an extended header (a long name, pax attributes) is bounded too. The archive is
read as a stream, once, by Snakemake's main process (`receive`): the claim is parsed and
checked there, before any job starts. The processes of jobs, which parse the workflow again,
read only the name (`receive(..., check=False)`), and the verifying job streams the archive
once more to write the files it reads, under names made here, so that no member name chooses
where anything goes (`ReceivedSubmission.unpack`).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import math
import os
import shutil
import tarfile
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bouquet_eval.core.config import ConfigError
from bouquet_eval.core.io import file_sha256
from bouquet_eval.core.names import UnsafeName, folder_name, refusal, shown
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.outputs import TRANSLATIONS_SUFFIX

if TYPE_CHECKING:
    import pandas as pd

CLAIM = "scores.csv"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
GROUP_COLUMNS = ("src_lang", "tgt_lang")
COUNT_COLUMN = "n_sentences"
TEXT_COLUMNS = ("unseen_by",)
"""Columns of a claim that hold text; every other column but the direction's holds numbers."""
MIB = 1 << 20
# An extended header (a long member name, pax attributes) is read whole by tarfile before the
# member it describes: no honest one comes near this.
MAX_EXTENDED_HEADER = MIB
# The longest line of scores.csv read (a row of a few hundred numbers is a few KiB).
MAX_CLAIM_LINE = MIB
_LISTED = 10
"""How many names of files not read a notice lists."""


@dataclass(frozen=True)
class ArchiveLimits:
    """What a received submission may hold (`verify.limits`); the defaults, and why, are in
    config/README.md."""

    members: int = 5000
    member_bytes: int = 64 * MIB
    total_bytes: int = 2048 * MIB
    claim_rows: int = 10000

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> ArchiveLimits:
        """From the configuration's `verify.limits` (sizes in MiB)."""
        return cls(
            members=int(settings["members"]),
            member_bytes=int(settings["member_mib"] * MIB),
            total_bytes=int(settings["total_mib"] * MIB),
            claim_rows=int(settings["claim_rows"]),
        )


class SubmissionError(ConfigError):
    """A received submission that cannot be verified; the message names it and what is wrong."""


@dataclass(frozen=True)
class Claim:
    """A checked scores.csv: one row per direction, its values as numbers."""

    frame: pd.DataFrame
    directions: tuple[Direction, ...]
    """The directions it lists, in its order."""
    columns: tuple[str, ...]
    """Its columns of values: counts, scores, intervals (not the directions', nor text)."""


@dataclass(frozen=True)
class ReceivedSubmission:
    source: Path
    """The folder, or the .tar.gz archive, as the maintainer gave it."""
    name: str
    """The model's name as the submission gives it: data, shown escaped."""
    folder_name: str
    """The folder name it maps to (`core.names.folder_name`): its folders, logs and jobs."""
    limits: ArchiveLimits = ArchiveLimits()
    directions: tuple[Direction, ...] = ()
    """The directions `scores.csv` lists, in its order, each one of the dataset's (empty where
    read with `check=False`)."""
    files: tuple[str, ...] = ()
    """The names of the plain files at the folder's top."""
    readable: frozenset[str] = frozenset()
    """Those that may be read: scores.csv, and the translations of the dataset's directions."""
    others: tuple[str, ...] = ()
    """What else it holds (links, folders, archive members elsewhere than its top): never read."""

    @property
    def is_archive(self) -> bool:
        return not self.source.is_dir()

    @property
    def label(self) -> str:
        """How messages name it."""
        return f"submission '{self.source}' (model {shown(self.name)})"

    def file_label(self, file_name: str) -> str:
        """How messages name one of its files."""
        member = f"{self.name}/{file_name}" if self.is_archive else file_name
        return f"{self.label}, member {shown(member)}"

    def ignored(self) -> list[str]:
        """What is never read: every file but scores.csv and the dataset's directions'
        translations."""
        return [name for name in self.files if name not in self.readable]

    def notices(self) -> list[str]:
        """A line for the files that are not read and one for what else it holds, each
        naming the first of them."""
        return [
            f"bouquet-eval: {self.label}: {_listed(names)} not read ({why})"
            for names, why in (
                (
                    self.ignored(),
                    "a submission brings data only: it is verified with this configuration",
                ),
                (self.others, "not a plain file at the top of its folder"),
            )
            if names
        ]

    def fingerprint(self) -> dict[str, str]:
        """Digests of what may be read (the claim, every translation file): a change redoes
        the verification."""
        if self.is_archive:
            return {self.source.name: file_sha256(self.source)}
        return {
            path.name: file_sha256(path)
            for path in sorted(self.source.iterdir())
            if (path.name == CLAIM or path.name.endswith(TRANSLATIONS_SUFFIX))
            and path.is_file()
            and not path.is_symlink()
        }

    def unpack(self, folder: Path, known: Sequence[Direction]) -> None:
        """Write scores.csv and the translations of the dataset's `known` directions that the
        submission holds into `folder`, each under the name made here from the direction; the
        limits are checked again as it is read."""
        wanted = {CLAIM, *(f"{d}{TRANSLATIONS_SUFFIX}" for d in known)}
        folder.mkdir(parents=True, exist_ok=True)
        for member in _members(self.source, self.limits):
            if member.plain_name in wanted:
                with member.open() as content, open(folder / member.plain_name, "wb") as target:
                    shutil.copyfileobj(content, target)


def receive(
    path: Path,
    known: Sequence[Direction],
    key: str,
    limits: ArchiveLimits = ArchiveLimits(),
    *,
    check: bool = True,
) -> ReceivedSubmission:
    """The submission at `path` (a folder or a .tar.gz), read once within `limits`, its claim
    parsed and its directions checked against `known`, the dataset's; SubmissionError naming
    `key`, the submission, the member and the line at fault otherwise. `check=False` reads the
    name only (the processes of jobs, once the main process has checked it)."""
    if not (path.is_dir() or (path.is_file() and path.name.endswith(ARCHIVE_SUFFIXES))):
        raise SubmissionError(f"submission '{path}' is neither a folder nor a .tar.gz archive", key)
    try:
        if not check:
            name = _top_name(path, limits)
            return ReceivedSubmission(path, name, _folder_name(name), limits)
        return _received(path, known, limits)
    except _Refused as refused:
        raise SubmissionError(
            f"submission '{path}'{refused.where}: {refused}; refused", key
        ) from None
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise SubmissionError(f"submission '{path}' cannot be read: {error}", key) from None


def _folder_name(name: str) -> str:
    try:
        return folder_name(name)
    except UnsafeName as error:
        raise _Refused(
            f"the model's name (its top folder's) {error}: it cannot name a folder"
        ) from None


def _top_name(path: Path, limits: ArchiveLimits) -> str:
    """The model's name: the folder's, or the archive's first member's top folder."""
    if path.is_dir():
        return path.resolve().name
    with contextlib.closing(_members(path, limits)) as members:
        for member in members:
            return member.top
    raise _Refused("the archive is empty")


def _received(path: Path, known: Sequence[Direction], limits: ArchiveLimits) -> ReceivedSubmission:
    name: str | None = None
    files, others = [], []
    claim: Claim | None = None
    for member in _members(path, limits):
        name = member.top
        if member.plain_name is None:
            if member.name.rstrip("/") != member.top:  # not the top folder itself
                others.append(member.name)
            continue
        files.append(member.plain_name)
        if member.plain_name == CLAIM:
            with member.open() as content:
                claim = _checked_claim(content, f", member {shown(member.name)}", known, limits)
    if name is None:
        raise _Refused("the archive is empty")
    folder = _folder_name(name)
    if claim is None:
        raise _Refused(f"it holds no {CLAIM}")
    readable = frozenset({CLAIM, *(f"{d}{TRANSLATIONS_SUFFIX}" for d in known)} & set(files))
    return ReceivedSubmission(
        path, name, folder, limits, claim.directions, tuple(sorted(files)), readable, tuple(others)
    )


# --- Members, within limits ------------------------------------------------------------------


class _Refused(ValueError):
    """What is wrong with a submission; `where` names the member and line (", member 'x'")."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


@dataclass
class _Member:
    name: str
    """Its name in the archive (the folder's file name for a folder)."""
    top: str
    """The top folder it is in: the model's name."""
    plain_name: str | None
    """Its file name where it is a plain file directly inside the top folder, else None."""
    open: Callable[[], IO[bytes]]
    """Its content; only while the iteration is at this member."""


def _members(source: Path, limits: ArchiveLimits) -> Generator[_Member]:
    """The members of a folder or archive, each checked against `limits` from its header (or
    its size on disk) before it is yielded."""
    counted = _Counted(limits)
    if source.is_dir():
        with os.scandir(source) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        for entry in entries:
            plain = entry.is_file(follow_symlinks=False)
            counted.add(entry.name, entry.stat(follow_symlinks=False).st_size if plain else 0)
            yield _Member(
                entry.name,
                source.resolve().name,
                entry.name if plain else None,
                partial(_opened, entry.path),
            )
        return
    with open(source, "rb") as raw:
        # Headers and their padding come on top of what members hold.
        capped = _Capped(
            gzip.GzipFile(fileobj=raw),
            limits.total_bytes + (limits.members + 2) * 3 * 512 + 20 * 512,
        )
        with tarfile.open(fileobj=capped, mode="r|", tarinfo=_BoundedTarInfo) as archive:
            top: str | None = None
            for member in archive:
                capped.member = member.name
                parts = member.name.split("/")
                if top is None:
                    top = parts[0]
                elif parts[0] != top:
                    raise _Refused(
                        f"it is not one folder: it holds {shown(top)} and {shown(parts[0])}",
                        f", member {shown(member.name)}",
                    )
                counted.add(member.name, member.size if member.isreg() else 0)
                plain = member.isreg() and len(parts) == 2 and parts[1] not in ("", ".", "..")
                yield _Member(
                    member.name,
                    top,
                    parts[1] if plain else None,
                    partial(_extracted, archive, member),
                )


def _opened(path: str) -> IO[bytes]:
    return open(path, "rb")


def _extracted(archive: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    content = archive.extractfile(member)
    assert content is not None  # a regular file
    return io.BufferedReader(_Forward(content))


class _Forward(io.RawIOBase):
    """A member's content read forward only: the archive is a stream, which cannot tell
    whether it could seek."""

    def __init__(self, content: IO[bytes]) -> None:
        self.content = content

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.content.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Counted:
    """Counts members and their sizes, refusing the first that goes past a limit."""

    def __init__(self, limits: ArchiveLimits) -> None:
        self.limits = limits
        self.members = 0
        self.total = 0

    def add(self, name: str, size: int) -> None:
        self.members += 1
        where = f", member {shown(name)}"
        if self.members > self.limits.members:
            raise _Refused(
                f"more than {self.limits.members} members, the limit (verify.limits.members)",
                where,
            )
        if size > self.limits.member_bytes:
            raise _Refused(
                f"{_size(size)} unpacked, over the limit of {_size(self.limits.member_bytes)} "
                "a file (verify.limits.member_mib)",
                where,
            )
        self.total += size
        if self.total > self.limits.total_bytes:
            raise _Refused(
                f"its members reach {_size(self.total)} unpacked here, over the limit of "
                f"{_size(self.limits.total_bytes)} (verify.limits.total_mib)",
                where,
            )


def _size(size: int) -> str:
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    if size >= MIB:
        return f"{size / MIB:.1f} MiB"
    return f"{size} bytes"


class _BoundedTarInfo(tarfile.TarInfo):
    """A member's header, its extended header (read whole, in memory) bounded first."""

    def _proc_member(self, tarfile: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED_HEADERS and self.size > MAX_EXTENDED_HEADER:
            raise _Refused(
                f"an extended header of {_size(self.size)}, over {_size(MAX_EXTENDED_HEADER)}",
                f", before member {shown(self.name)}",
            )
        return super()._proc_member(tarfile)  # type: ignore[misc]


_EXTENDED_HEADERS = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


class _Capped(io.RawIOBase):
    """The archive's unpacked stream, refused once more comes out of it than the limits allow
    (what member headers do not count: padding, extended headers)."""

    def __init__(self, stream: io.BufferedIOBase, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.read_so_far = 0
        self.member = ""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size if size >= 0 else io.DEFAULT_BUFFER_SIZE)
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise _Refused(
                f"it unpacks to more than {_size(self.limit)} (verify.limits.total_mib)",
                f", member {shown(self.member)}" if self.member else "",
            )
        return data


def _listed(names: Sequence[str]) -> str:
    listed = ", ".join(shown(name) for name in names[:_LISTED])
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return f"{listed}{more}"


# --- The claim -------------------------------------------------------------------------------


def read_claim(
    content: IO[bytes],
    label: str,
    known: Sequence[Direction],
    limits: ArchiveLimits = ArchiveLimits(),
) -> Claim:
    """scores.csv checked as it is read: UTF-8 (a byte-order mark allowed), any line ending,
    the columns of the directions and the sentence count, each column once, every row a
    direction of the dataset's `known` ones listed once, every value a number (empty: none),
    at most `limits.claim_rows` rows; SubmissionError naming `label` (the file), the line and
    the column at fault."""
    try:
        return _checked_claim(content, "", known, limits)
    except _Refused as refused:
        raise SubmissionError(f"{label}{refused.where}: {refused}") from None


def _checked_claim(
    content: IO[bytes], member: str, known: Sequence[Direction], limits: ArchiveLimits
) -> Claim:
    """`read_claim`, its faults `_Refused` naming `member` (", member 'x'"), the line and the
    column."""
    import pandas as pd

    def at(line: int, column: str | None = None) -> str:
        return f"{member}, line {line}" + (
            f", column {shown(column, quoted=False)}" if column else ""
        )

    reader = csv.reader(_claim_lines(content, at, limits))
    try:
        header = next(reader, None)
        if header is None:
            raise _Refused("it is empty", member)
        _check_header(header, at(1))
        dataset = {d.name: d for d in known}
        seen: dict[Direction, int] = {}
        rows: list[list[Any]] = []
        numbers = [
            position
            for position, column in enumerate(header)
            if column not in (*GROUP_COLUMNS, *TEXT_COLUMNS)
        ]
        for fields in reader:
            line = reader.line_num
            if not fields:
                continue
            if len(fields) != len(header):
                raise _Refused(f"{len(fields)} fields where the header has {len(header)}", at(line))
            row = dict(zip(header, fields, strict=True))
            name = f"{row['src_lang']}-{row['tgt_lang']}"
            direction = dataset.get(name)
            if direction is None:
                raise _Refused(
                    f"direction {shown(name)} is not a direction of the dataset", at(line)
                )
            if direction in seen:
                raise _Refused(
                    f"direction {name} is claimed twice (also at line {seen[direction]})", at(line)
                )
            seen[direction] = line
            values: list[Any] = list(fields)
            for position in numbers:
                values[position] = _number(fields[position], at(line, header[position]))
            rows.append(values)
    except csv.Error as error:
        raise _Refused(f"not CSV ({error})", at(reader.line_num)) from None
    frame = pd.DataFrame(rows, columns=header)
    for position in numbers:
        frame[header[position]] = frame[header[position]].astype(float)
    return Claim(frame, tuple(seen), tuple(header[position] for position in numbers))


def _claim_lines(
    content: IO[bytes], at: Callable[[int], str], limits: ArchiveLimits
) -> Iterator[str]:
    """The lines of scores.csv, decoded (a byte-order mark dropped), each at most
    MAX_CLAIM_LINE bytes, at most `limits.claim_rows` of them after the header."""
    number = 0
    while line := content.readline(MAX_CLAIM_LINE + 1):
        number += 1
        if len(line) > MAX_CLAIM_LINE:
            raise _Refused(f"a line longer than {_size(MAX_CLAIM_LINE)}", at(number))
        if number > limits.claim_rows + 1:
            raise _Refused(
                f"more than {limits.claim_rows} rows, the limit (verify.limits.claim_rows)",
                at(number),
            )
        try:
            yield line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as error:
            raise _Refused(f"not UTF-8 text (byte {line[error.start]:#04x})", at(number)) from None


def _check_header(header: list[str], where: str) -> None:
    for column in header:
        if (reason := refusal(column)) is not None:
            raise _Refused(f"the header's column {shown(column)} {reason}", where)
    repeated = sorted({column for column in header if header.count(column) > 1})
    if repeated:
        raise _Refused(f"the header names {', '.join(map(shown, repeated))} twice", where)
    missing = [c for c in (*GROUP_COLUMNS, COUNT_COLUMN) if c not in header]
    if missing:
        raise _Refused(f"no column {', '.join(missing)} in the header ({_listed(header)})", where)


def _number(value: str, where: str) -> float:
    if not value.strip():
        return math.nan
    try:
        return float(value)
    except ValueError:
        raise _Refused(f"{shown(value, 40)} is not a number", where) from None
