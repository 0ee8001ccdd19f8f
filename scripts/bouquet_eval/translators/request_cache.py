"""The answers a paid API has given, kept on disk so that none is paid for twice.

Append-only JSON Lines files, one per writer, rather than one SQLite database: a request cache
is shared by the jobs of a cluster, and they often sit on a network file system (NFS, Lustre)
where SQLite's locking is not to be trusted, while appending to a file of one's own needs no
lock at all. A crash tears at most the last line of a file, which loading skips.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

REQUEST_CACHE = Path(".cache") / "requests"
"""Where a model's cache is, in its output folder."""


class RequestCache:
    """Answers of completed requests, in append-only JSON Lines files in `directory`.

    Each translator appends to a file of its own, named at random, so that jobs sharing the
    directory never interleave their writes, even on file systems where appends from several
    processes are not atomic. Records are written with one `write` followed by `fsync`, as
    soon as their answers arrive; a crash can therefore only tear the last line of a file, and
    lines that do not parse are skipped on loading. A record holds the request's key (a hash)
    and the answer, nothing secret. Every record is read into memory on first use, so a
    directory per model (or per run) keeps that small.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._answers: dict[str, str] | None = None
        self._path: Path | None = None

    def answers(self) -> dict[str, str]:
        """Key -> answer, read from disk on first use and kept up to date by `append`."""
        if self._answers is None:
            self._answers = self._load()
        return self._answers

    def append(self, records: list[tuple[str, str]]) -> None:
        """Write (key, answer) pairs durably: blocks for an fsync."""
        lines = "".join(
            json.dumps({"key": key, "content": content}, ensure_ascii=False) + "\n"
            for key, content in records
        )
        if self._path is None:
            self._path = create_own_file(self.directory)
        append_durably(self._path, lines)
        self.answers().update(records)

    def _load(self) -> dict[str, str]:
        answers: dict[str, str] = {}
        skipped = 0
        for path in sorted(self.directory.glob("*.jsonl")):
            for line in path.read_bytes().splitlines():
                record = _parse_record(line)
                if record is not None:
                    answers[record[0]] = record[1]
                elif line.strip():
                    skipped += 1
        if skipped:
            log.warning(
                "%s: skipped %d unreadable records (torn by a crash?)", self.directory, skipped
            )
        return answers


def create_own_file(directory: Path) -> Path:
    """A new, empty JSON Lines file in `directory`, named at random, durably."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex}.jsonl"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    # The new name must be on disk too, or a crash could lose the file with its records.
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return path


def append_durably(path: Path, lines: str) -> None:
    """Append with one write and an fsync: a crash can tear only the last line."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        remaining = memoryview(lines.encode())
        while remaining:
            remaining = remaining[os.write(descriptor, remaining) :]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _parse_record(line: bytes) -> tuple[str, str] | None:
    try:
        record = json.loads(line)
    except ValueError:  # also a UnicodeDecodeError, when a write stopped inside a character
        return None
    if not isinstance(record, dict):
        return None
    key, content = record.get("key"), record.get("content")
    return (key, content) if isinstance(key, str) and isinstance(content, str) else None


class CacheWriter:
    """Appends answers to a `RequestCache` from a thread, so that the event loop never waits for
    an fsync (milliseconds each on common disks); answers that arrive while one batch is being
    written go together into the next, so an fsync per answer does not cap throughput either.
    """

    def __init__(self, cache: RequestCache) -> None:
        self._cache = cache
        self._queued: list[tuple[str, str]] = []
        self._writing: asyncio.Task[None] | None = None

    def add(self, key: str, content: str) -> None:
        self._queued.append((key, content))
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write_queued(self._writing))

    async def _write_queued(self, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await previous  # a failed write fails every later one, and so `flush`
        while self._queued:
            batch, self._queued = self._queued, []
            await asyncio.to_thread(self._cache.append, batch)

    async def flush(self) -> None:
        """Wait until every answer added is on disk; raises what writing raised."""
        if self._writing is not None:
            # Shielded: a waiter that is cancelled (a batch, when a stream is closed early)
            # must not cancel the writing that the cache and the other waiters depend on.
            await asyncio.shield(self._writing)
