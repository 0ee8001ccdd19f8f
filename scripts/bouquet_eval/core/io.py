"""File input and output: atomic writes, JSONL translations, digests."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

_UMASK = os.umask(0)
os.umask(_UMASK)

TRANSLATION_COLUMNS = ("src_lang", "tgt_lang", "src_text", "ref_text", "mt_text", "uniq_id")


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it replaces `path` only if the block succeeds.

    A crash therefore never leaves a half-written file under the final name.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with _errors_naming(path):
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
        )
        os.close(handle)
        # mkstemp creates the file readable by its owner only; give it the usual permissions.
        os.chmod(temporary, 0o666 & ~_UMASK)
        try:
            yield Path(temporary)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise


@contextlib.contextmanager
def _errors_naming(path: Path) -> Iterator[None]:
    """OSErrors name `path` where they name no file (a failed write, on a full disk) or name
    its temporary, which the user never sees."""
    try:
        yield
    except OSError as error:
        named = error.filename
        if error.errno is None or (named is not None and not _is_temporary_of(Path(named), path)):
            raise
        raise OSError(error.errno, error.strerror, str(path)) from error


def _is_temporary_of(candidate: Path, path: Path) -> bool:
    return candidate.parent == path.parent and temporary_target(candidate.name) == path.name


def temporary_target(name: str) -> str | None:
    """The name of the file that a temporary file of `atomic_path` named `name` was to become
    (`.<name>.<random>.tmp`, the random part without dots); None for any other name."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    target, dot, _ = name[1:].removesuffix(".tmp").rpartition(".")
    return target if dot else None


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Write `path` through `write(temporary)`, whose return value is ignored."""
    with atomic_path(path) as temporary:
        write(temporary)


def json_reason(error: json.JSONDecodeError) -> str:
    """The decoder's reason, whole: some end in "at" and expect the position after them."""
    reason = error.msg.removesuffix(" at")
    if error.pos < len(error.doc):
        reason += f", found {error.doc[error.pos]!r}"
    return f"not valid JSON: {reason}"


def unpaired_surrogate(text: str) -> str | None:
    """The first unpaired surrogate in `text`, which JSON and YAML can write as an escape but
    which is not text (no UTF-8 file holds one); None when there is none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return text[error.start]
    return None


def write_text(path: Path, text: str) -> None:
    write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def write_json(path: Path, value: Any) -> None:
    write_text(path, json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


_JSON_LINE = json.JSONEncoder(ensure_ascii=False)
"""One encoder for every line: `json.dumps` given an option makes a new one per call."""


def write_jsonl(path: Path, frame: pd.DataFrame) -> None:
    # From the columns as lists: a record per row (`to_dict`) costs as much as encoding it.
    names = frame.columns.tolist()
    columns = [frame[name].tolist() for name in names]
    rows = (dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True))
    text = "".join(_JSON_LINE.encode(row) + "\n" for row in rows)
    write_atomically(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def write_parquet(path: Path, frame: pd.DataFrame) -> None:
    write_atomically(path, lambda temporary: frame.to_parquet(temporary, index=False))


def write_table(path: Path, table: pa.Table) -> None:
    import pyarrow.parquet as pq

    write_atomically(path, lambda temporary: pq.write_table(table, temporary))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
