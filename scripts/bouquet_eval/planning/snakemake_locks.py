"""Snakemake's locks, made safe for runs that go side by side in one folder.

Parts of one selection (`directions.shard`) are separate runs of the workflow in one working
directory, often started together. Snakemake 9.27 lets runs of disjoint outputs go side by
side, but its file locks (`snakemake.persistence.file.FilePersistence`) are not written for
it:
- a run that ends removes the whole lock folder (`shutil.rmtree`), the locks of the runs still
  going with it: they are then unprotected, and two runs that end together race to remove the
  same files, the second failing with `FileNotFoundError` after all its jobs succeeded;
- a run takes the first free lock number after checking that it is free, so two runs that
  start together may write the same lock file, one over the other;
- a run reading the locks fails when another removes one between the listing and the reading.

`share_locks` changes one run's persistence object (Snakemake's classes, and so every other
run, are left alone), while it plans and before it takes its locks:
- a lock file is created only if it does not exist yet (the next number is tried otherwise);
- a run that ends removes its own lock files, and the folder only once it is empty;
- a lock file removed while it is being read holds nothing.
The check itself, which runs may go together, is Snakemake's own: a run does not start while
another one holds a lock on any of its inputs or outputs. `snakemake --unlock` still removes
every lock.

Like `bouquet_eval.planning.snakemake_patch`, it applies only to the code it was written
against (`LOCK_SOURCES`), whole or not at all.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from bouquet_eval.planning.snakemake_patch import changed_sources

LOCK_SOURCES = {
    "PersistenceBase.lock": "a0dd9daec26ea14b",
    "PersistenceBase.unlock": "26aca7b69735211f",
    "FilePersistence._read_locks": "b22956063309135a",
    "FilePersistence._write_locks": "0f786fb184b3b690",
    "FilePersistence._delete_locks": "831014b3c20699d1",
}
"""sha256 (first 16 digits) of the source of each method `share_locks` replaces in Snakemake
9.27.1 (the run's `lock` no longer calls `unlock`, which calls `_delete_locks`)."""

UNSHARED_LOCKS = (
    "the workflow's patch of its locks",
    "runs side by side in one folder, such as the parts of a selection, may remove each "
    "other's locks or fail as they end",
)
"""The patch and what a run costs without it, for `unpatched_message`."""


def changed_lock_sources() -> list[str]:
    """The methods of `LOCK_SOURCES` whose source is not the one the patch was written for."""
    from snakemake.persistence import PersistenceBase
    from snakemake.persistence.file import FilePersistence

    classes = {"PersistenceBase": PersistenceBase, "FilePersistence": FilePersistence}
    return changed_sources(classes, LOCK_SOURCES)


def share_locks(persistence: Any, explain_refusal: Callable[[], str | None]) -> list[str]:
    """Make this run's locks safe beside other runs (see the module docstring); return the
    methods left as they are because their source differs (then all are). When the locks
    refuse the run, `explain_refusal()`, if it says something, is printed before Snakemake's
    own message."""
    from snakemake.persistence.file import FilePersistence

    if type(persistence) is not FilePersistence:  # another backend (--persistence-backend)
        return []
    changed = changed_lock_sources()
    if not changed:
        _SharedLocks(persistence, explain_refusal).install()
    return changed


class _SharedLocks:
    """What `share_locks` puts in place of three methods of one FilePersistence."""

    def __init__(self, persistence: Any, explain_refusal: Callable[[], str | None]) -> None:
        self.persistence = persistence
        self.explain_refusal = explain_refusal

    def install(self) -> None:
        self.persistence.lock = self.lock
        self.persistence._read_locks = self.read_locks
        self.persistence._write_locks = self.write_locks

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Snakemake's `lock`, its conflict check the same, releasing only this run's locks."""
        from snakemake.exceptions import LockException

        persistence = self.persistence
        inputs = {str(path) for path in persistence.all_inputfiles()}
        outputs = {str(path) for path in persistence.all_outputfiles()}
        for kind, key in self.read_locks():
            if key in outputs or (kind == "output" and key in inputs):
                if (explanation := self.explain_refusal()) is not None:
                    print(explanation, file=sys.stderr)
                raise LockException()
        try:
            self.write_locks("input", inputs)
            self.write_locks("output", outputs)
            yield
        finally:
            self.release()

    def read_locks(self) -> Iterator[tuple[str, str]]:
        """Snakemake's `_read_locks`: (kind, path) for every path another run has locked."""
        folder = self.persistence._lockdir
        with contextlib.suppress(FileNotFoundError):
            for name in sorted(os.listdir(folder)):
                number, _, kind = name.partition(".")
                if not number.isdigit() or kind not in ("input.lock", "output.lock"):
                    continue
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    with open(os.path.join(folder, name)) as lock:
                        lines = lock.read().splitlines()
                    yield from ((kind.split(".")[0], line.strip()) for line in lines)

    def write_locks(self, kind: str, keys: Iterable[str]) -> None:
        """Snakemake's `_write_locks`, creating a lock file only where none is."""
        keys = list(keys)
        if not keys:
            return
        folder = self.persistence._lockdir
        for number in itertools.count():
            os.makedirs(folder, exist_ok=True)  # a run that ended may just have removed it
            path = os.path.join(folder, f"{number}.{kind}.lock")
            try:
                with open(path, "x") as lock:
                    print(*keys, sep="\n", file=lock)
            except (FileExistsError, FileNotFoundError):
                continue
            self.persistence._lockfile[kind] = path
            return

    def release(self) -> None:
        """This run's lock files, and the folder if no other run's is left in it."""
        for path in self.persistence._lockfile.values():
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        self.persistence._lockfile.clear()
        with contextlib.suppress(OSError):
            os.rmdir(self.persistence._lockdir)
