"""A received submission (a folder, or a .tar.gz of one), read as data and nothing else.

A leaderboard maintainer verifies a submission with their own configuration: the dataset, its
revision, the metrics and their settings, the tolerances. From the submission only three things
are taken: the model's name (the folder's, or the archive's top folder's), `scores.csv`, and the
translation file `<src>-<tgt>.jsonl` of each direction, where each direction `scores.csv` lists
must be a direction of the maintainer's dataset. Every other file (a `config.yaml`, a dataset
copy, `COMMANDS.txt`) is never opened, and is named as ignored; links, nested folders and
archive members that are not plain files at the top of the folder are never read either. An
archive is read in memory where the workflow plans, and its members are written out only by the
verifying job, under names made here, so that no member name chooses where anything goes.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import tarfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bouquet_eval.core.config import ConfigError
from bouquet_eval.core.io import file_sha256
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.outputs import TRANSLATIONS_SUFFIX

CLAIM = "scores.csv"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
# A model's name as the folder of its outputs: no separator, no leading dot.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


class SubmissionError(ConfigError):
    """A received submission that cannot be verified; the message names it and what is wrong."""


@dataclass(frozen=True)
class ReceivedSubmission:
    source: Path
    """The folder, or the .tar.gz archive, as the maintainer gave it."""
    name: str
    directions: tuple[Direction, ...]
    """The directions `scores.csv` lists, in its order, each one of the dataset's."""
    files: tuple[str, ...]
    """The names of the plain files at the folder's top."""
    readable: frozenset[str] = frozenset()
    """Those that may be read: scores.csv, and the translations of the dataset's directions."""
    others: tuple[str, ...] = ()
    """What else it holds (links, folders, archive members elsewhere than its top): never read."""

    @property
    def is_archive(self) -> bool:
        return self.source.is_file()

    def ignored(self) -> list[str]:
        """What is never read: every file but scores.csv and the dataset's directions'
        translations."""
        return [name for name in self.files if name not in self.readable]

    def notices(self) -> list[str]:
        """One line per file that is not read, saying why."""
        return [
            f"bouquet-eval: submission '{self.source}' (model '{self.name}'): {name} not read "
            "(a submission brings data only: it is verified with this configuration)"
            for name in self.ignored()
        ] + [
            f"bouquet-eval: submission '{self.source}' (model '{self.name}'): {name!r} not read "
            "(not a plain file at the top of its folder)"
            for name in self.others
        ]

    def fingerprint(self) -> dict[str, str]:
        """Digests of what is read: a change redoes the verification."""
        if self.is_archive:
            return {self.source.name: file_sha256(self.source)}
        return {name: file_sha256(self.source / name) for name in sorted(self.readable)}

    def unpack(self, folder: Path, directions: Sequence[Direction]) -> None:
        """Write scores.csv and the translations of `directions` that the submission holds into
        `folder`, each under the name made here from the direction."""
        wanted = ({f"{d}{TRANSLATIONS_SUFFIX}" for d in directions} | {CLAIM}) & self.readable
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in self._contents(wanted):
            with open(folder / name, "wb") as target:
                shutil.copyfileobj(content, target)

    def _contents(self, wanted: set[str]) -> Iterator[tuple[str, IO[bytes]]]:
        if not self.is_archive:
            for name in sorted(wanted):
                with open(self.source / name, "rb") as handle:
                    yield name, handle
            return
        with tarfile.open(self.source, "r:gz") as archive:
            for member in archive:
                member_name = _plain_member(member, self.name)
                if member_name in wanted:
                    extracted = archive.extractfile(member)
                    assert extracted is not None  # a regular file (_plain_member)
                    yield member_name, extracted


def receive(path: Path, known: Sequence[Direction], key: str) -> ReceivedSubmission:
    """The submission at `path` (a folder or a .tar.gz), its directions checked against `known`,
    the dataset's; SubmissionError naming `key` and what is wrong otherwise."""
    if path.is_dir():
        name = path.resolve().name
        entries = sorted(path.iterdir())
        plain = [p for p in entries if p.is_file() and not p.is_symlink()]
        files = tuple(p.name for p in plain)
        others = tuple(p.name for p in entries if p not in plain)
        claim = (path / CLAIM).read_bytes() if CLAIM in files else None
    elif path.is_file() and path.name.endswith(ARCHIVE_SUFFIXES):
        name, files, others, claim = _read_archive(path, key)
    else:
        raise SubmissionError(f"submission '{path}' is neither a folder nor a .tar.gz archive", key)
    if not _NAME.fullmatch(name):
        raise SubmissionError(f"submission '{path}': '{name}' is not a model name", key)
    if claim is None:
        raise SubmissionError(f"submission '{path}' holds no {CLAIM}", key)
    directions = claimed_directions(
        path / CLAIM if path.is_dir() else path, _claim_rows(path, claim, key), known, key
    )
    readable = frozenset({CLAIM, *(f"{d}{TRANSLATIONS_SUFFIX}" for d in known)} & set(files))
    return ReceivedSubmission(path, name, directions, files, readable, others)


def _plain_member(member: tarfile.TarInfo, top: str) -> str | None:
    """The file name of a regular file directly inside the archive's top folder; None for any
    other member (a link, a device, a nested or absolute or `..` path)."""
    parts = member.name.split("/")
    if member.isreg() and len(parts) == 2 and parts[0] == top and parts[1] not in ("", ".", ".."):
        return parts[1]
    return None


def _read_archive(
    path: Path, key: str
) -> tuple[str, tuple[str, ...], tuple[str, ...], bytes | None]:
    """The archive's top folder, the plain files in it, its other members and its scores.csv,
    read in memory."""
    try:
        with tarfile.open(path, "r:gz") as archive:
            members = archive.getmembers()
            tops = {member.name.split("/")[0] for member in members}
            if len(tops) != 1:
                raise SubmissionError(
                    f"submission '{path}' is not one folder: it holds {sorted(tops)[:5]}", key
                )
            (top,) = tops
            files, others, claim = [], [], None
            for member in members:
                name = _plain_member(member, top)
                if name is None:
                    if member.name != top:
                        others.append(member.name)
                    continue
                files.append(name)
                if name == CLAIM:
                    extracted = archive.extractfile(member)
                    claim = extracted.read() if extracted else None
    except (tarfile.TarError, OSError, EOFError) as error:
        raise SubmissionError(
            f"submission '{path}' is not a readable .tar.gz: {error}", key
        ) from None
    return top, tuple(sorted(files)), tuple(others), claim


def _claim_rows(source: Path, claim: bytes, key: str) -> list[tuple[str, str]]:
    """The (src_lang, tgt_lang) of each row of a scores.csv."""
    rows = csv.DictReader(io.StringIO(claim.decode("utf-8", errors="replace")))
    missing = {"src_lang", "tgt_lang"} - set(rows.fieldnames or ())
    if missing:
        raise SubmissionError(f"{source}: {CLAIM} has no column {', '.join(sorted(missing))}", key)
    return [(row["src_lang"], row["tgt_lang"]) for row in rows]


def claimed_directions(
    source: Path | str,
    rows: Iterable[tuple[object, object]],
    known: Sequence[Direction],
    key: str | None = None,
) -> tuple[Direction, ...]:
    """The directions of the (src_lang, tgt_lang) rows of a scores.csv, in its order;
    SubmissionError naming the line of the first that is not one of the dataset's `known`
    directions (`../x`, a typo, another dataset's)."""
    dataset = {d.name: d for d in known}
    directions = []
    for line, (src, tgt) in enumerate(rows, start=2):
        name = f"{src}-{tgt}"
        if name not in dataset:
            raise SubmissionError(
                f"{source}, line {line}: direction {name!r} is not a direction of the "
                "dataset; refused",
                key,
            )
        directions.append(dataset[name])
    return tuple(dict.fromkeys(directions))
