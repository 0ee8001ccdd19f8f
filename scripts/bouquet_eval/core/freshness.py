"""Whether an output is current, and telling Snakemake when one is not.

The rule (docs/design.md, "When an output is current"): an output is current when its sidecar
record says it was produced with the expected settings digest from inputs with the content
they have now, and the output still has the content that was written. `ResumableOutput`
applies it; the jobs apply it to each output before they make it, and the planner
(`check_job`) to the existing outputs of every job, telling Snakemake through the job's stamp.

A settings digest covers every value with its real content: settings hold no secret (the
configuration may not, see `secrets.refuse_secrets`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from bouquet_eval.core.io import file_sha256, temporary_target, write_atomically, write_json

log = logging.getLogger(__name__)


def settings_digest(settings: Any) -> str:
    """A digest of `settings` that changes whenever any value does: the sha256 of their
    canonical JSON."""
    canonical = json.dumps(settings, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class FileState:
    """What a file held when it was recorded."""

    sha256: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path, sha256: str | None = None) -> FileState:
        """The file's state now; `sha256`, where given, is its content's hash, known to the
        caller (a copy of a file it has just hashed), so that the file is not read again."""
        status = path.stat()
        if sha256 is None:
            identity = (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
            sha256 = _sha256(path, identity)
        return cls(sha256, status.st_size, status.st_mtime_ns)

    def matches(self, path: Path) -> bool:
        """Whether `path` still holds this content (hashed only when its stat changed)."""
        try:
            status = path.stat()
        except FileNotFoundError:
            return False
        if status.st_size != self.size:
            return False
        return status.st_mtime_ns == self.mtime_ns or file_sha256(path) == self.sha256


@lru_cache(maxsize=1 << 14)
def _sha256(path: Path, identity: tuple[int, ...]) -> str:
    """The file's hash, computed once in a process while its inode, size and times stay the same
    (a rewrite changes them): the aggregate job records four outputs made from every scored file
    of the model, and hashes each file once instead of four times."""
    return file_sha256(path)


@dataclass(frozen=True)
class ResumableOutput:
    """A file recomputed only when what produces it changes, and rebuilt when damaged.

    Beside `path` live two things Snakemake does not know about and so never deletes:
    - `.provenance/<name>.json`: the settings digest, the state of each input and of the output
      when it was written, the settings and the producing job's environment;
    - `.cache/<key>/<name>`: a verified copy written as soon as the output is done, keyed by
      the digest and the inputs, so that work survives a job that fails later (Snakemake then
      removes or restores its outputs) and a damaged output can be restored.
    """

    path: Path
    settings: Mapping[str, Any]
    inputs: Mapping[str, Path] = field(default_factory=dict)
    """Role -> file whose content the output was made from (`dataset`, `translations`, ...)."""
    cache_variant: Any = None
    """What else the job knows decides the content (e.g. metric versions), for the cache key."""
    cached_copy: bool = True
    """Whether `publish` keeps the cached copy: an output that costs less to make again than to
    copy (a direction's gathered scores) keeps none."""

    @cached_property
    def digest(self) -> str:
        return settings_digest(self.settings)

    @property
    def sidecar(self) -> Path:
        return self.path.parent / ".provenance" / f"{self.path.name}.json"

    def record(self) -> dict[str, Any] | None:
        try:
            record = json.loads(self.sidecar.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return record if isinstance(record, dict) else None

    def stale_reason(self) -> str | None:
        """Why the output is not current, or None when it is."""
        if not self.path.is_file():
            return "missing"
        record = self.record()
        if record is None or "output" not in record:
            return "no record of what produced it"
        if record.get("digest") != self.digest:
            return f"its settings changed: {settings_change(record.get('settings'), self.settings)}"
        recorded_inputs = record.get("inputs") or {}
        if set(recorded_inputs) != set(self.inputs):
            return "its inputs changed"
        for role, path in sorted(self.inputs.items()):
            if not _state(recorded_inputs[role]).matches(path):
                return f"its {role} ({path}) changed"
        if not _state(record["output"]).matches(self.path):
            return "its content is not what was written (damaged or edited)"
        self._remember_times(record)
        return None

    def _remember_times(self, record: dict[str, Any]) -> None:
        """After a check that had to hash files whose modification time changed (Snakemake
        refreshes the times of every output of a job that ran), record the new times, so that
        the next check is a `stat` again. The contents were found the same."""
        states = [(record["output"], self.path)]
        states += [(record["inputs"][role], path) for role, path in self.inputs.items()]
        changed = False
        for state, path in states:
            mtime = path.stat().st_mtime_ns
            if state["mtime_ns"] != mtime:
                state["mtime_ns"] = mtime
                changed = True
        if changed:
            write_json(self.sidecar, record)

    def is_current(self) -> bool:
        return self.stale_reason() is None

    def holds_what_was_written(self) -> bool:
        """Whether the output and its `inputs` hold what they held when it was written, with
        whatever settings (which `is_current` checks too); its record may name more inputs."""
        record = self.record()
        if record is None or "output" not in record:
            return False
        recorded = record.get("inputs") or {}
        return all(
            role in recorded and _state(recorded[role]).matches(path)
            for role, path in self.inputs.items()
        ) and _state(record["output"]).matches(self.path)

    @cached_property
    def input_states(self) -> dict[str, FileState]:
        return {role: FileState.of(path) for role, path in sorted(self.inputs.items())}

    @cached_property
    def cached(self) -> Path:
        inputs = {role: state.sha256 for role, state in self.input_states.items()}
        key = settings_digest([self.digest, inputs, self.cache_variant])
        return self.path.parent / ".cache" / key[:16] / self.path.name

    def restore_from_cache(self, environment: Mapping[str, Any] | None = None) -> bool:
        """Publish the cached copy if there is one and it is intact; discard a damaged one."""
        if not self.cached_copy or not self.cached.is_file():
            return False
        content = file_sha256(self.cached)
        try:
            expected = json.loads(_checksum_file(self.cached).read_text(encoding="utf-8"))
            intact = _state(expected).sha256 == content
        except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
            intact = False
        if not intact:
            log.warning("discarding %s: its content does not match its checksum", self.cached)
            for path in (self.cached, _checksum_file(self.cached)):
                path.unlink(missing_ok=True)
            return False
        self._publish_cached(environment, content)
        return True

    def publish(
        self, write: Callable[[Path], object], environment: Mapping[str, Any] | None = None
    ) -> None:
        """Write the output through `write(path)`: into the cache first, then in place.

        `environment` (what the job ran with: versions, hardware, model commits) goes into the
        record for the manifest; it does not decide currency.
        """
        if not self.cached_copy:
            write_atomically(self.path, write)
            self.record_written(environment)
            return
        write_atomically(self.cached, write)
        cached = FileState.of(self.cached)
        write_json(_checksum_file(self.cached), asdict(cached))
        self._publish_cached(environment, cached.sha256)

    def _publish_cached(self, environment: Mapping[str, Any] | None, sha256: str) -> None:
        """Copy the cached copy, whose content has the hash `sha256`, in place."""

        def copy(temporary: Path) -> None:
            shutil.copyfile(self.cached, temporary)

        write_atomically(self.path, copy)
        self.record_written(environment, sha256)

    def record_written(
        self, environment: Mapping[str, Any] | None = None, sha256: str | None = None
    ) -> None:
        """Record that `path` was just written from the inputs as they are now.

        `publish` calls it; an output written by other means (one without a cached copy, such
        as a model's aggregates) calls it after writing. `sha256`: the hash of what was written,
        where the caller knows it.
        """
        record = {
            "digest": self.digest,
            "settings": self.settings,
            "inputs": {role: asdict(state) for role, state in self.input_states.items()},
            "output": asdict(FileState.of(self.path, sha256)),
            "environment": dict(environment or {}),
        }
        write_json(self.sidecar, record)


def _shown(value: Any, width: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def _differences(before: Any, after: Any, path: str) -> list[str]:
    if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
        return [] if before == after else [f"{path} ({_shown(before)} -> {_shown(after)})"]
    found = []
    for key in sorted(set(before) | set(after), key=str):
        where = f"{path}.{key}" if path else str(key)
        if key not in before:
            found.append(f"{where} (new: {_shown(after[key])})")
        elif key not in after:
            found.append(f"{where} (no longer a setting; was {_shown(before[key])})")
        else:
            found += _differences(before[key], after[key], where)
    return found


def settings_change(recorded: Any, current: Mapping[str, Any]) -> str:
    """Which settings differ from those an output recorded, with both values: what a person
    reads to know why it is rebuilt (a setting changed, or a release added or removed one)."""
    before = recorded if isinstance(recorded, Mapping) else {}
    return "; ".join(_differences(before, current, "")) or "recorded under another digest"


def remove_stray_temporaries(outputs: Iterable[ResumableOutput]) -> list[Path]:
    """Delete the temporary files that killed writes of `outputs` left behind.

    Only the job that owns an output writes it, and Snakemake lets one run at a time work in a
    directory, so every such file of these outputs is a leftover; those of other outputs may be
    another job's writes in progress, and stay. Each folder is listed once: a model's folder
    holds two files per direction, and listing it once per output would cost a job more than
    its bookkeeping should.
    """
    owned: dict[Path, set[str]] = {}
    for output in outputs:
        folders = [output.path.parent, output.sidecar.parent]
        if output.cached_copy:
            folders.append(output.cached.parent)
        for folder in folders:
            owned.setdefault(folder, set()).update((output.path.name, output.sidecar.name))
    found: list[Path] = []
    for folder, names in owned.items():
        try:
            entries = os.listdir(folder)
        except FileNotFoundError:
            continue
        found += [folder / entry for entry in entries if temporary_target(entry) in names]
    for path in found:
        path.unlink(missing_ok=True)
        log.info("removed %s, left by an interrupted write", path)
    return found


def _checksum_file(cached: Path) -> Path:
    return cached.with_name(cached.name + ".state.json")


def _state(recorded: Any) -> FileState:
    return FileState(**recorded) if isinstance(recorded, dict) else FileState("", -1, -1)


# Telling Snakemake. It plans from missing files, modification times and its own records of a
# job (its parameters, code and set of inputs), none of which sees what only a content check
# sees: an output that Snakemake put back after its job failed (update() outputs: a fresh
# modification time on old content), a file cut short or edited by hand, an input whose content
# changed while the output still looks newer, settings whose change leaves Snakemake's records
# alike. So each job has a *stamp*, a small file among its inputs, rewritten by the planner when
# one of the job's existing outputs is not current: Snakemake then plans the job ("updated
# input files"), and the job rebuilds exactly the outputs that are not current. Snakemake's
# records cannot carry this instead: a parameter that said which outputs are stale would differ
# from the recorded one on the run after the job, and rerun it again.
#
# Every job has its stamp as an input from its first real run on (a stamp that appeared later
# would change the job's set of inputs, which Snakemake takes as a reason to run it). A dry run
# writes a stamp only to show a job that must run. A stamp rewritten by a plan whose job never
# ran (a dry run, a run stopped first) is dated back before the job's outputs once they are all
# current again, so that it no longer makes Snakemake plan the job: a dry run changes nothing
# that later runs do.

STAMPS = Path(".provenance") / "jobs"
"""Under a model's output folder: one stamp per job."""


@dataclass(frozen=True)
class StaleOutput:
    path: Path
    reason: str


def stamp_path(model_dir: Path, job: str) -> Path:
    return model_dir / STAMPS / f"{job}.json"


def check_job(
    stamp: Path, outputs: Sequence[ResumableOutput], dry_run: bool = False
) -> list[StaleOutput]:
    """The job's existing outputs that are not current; the stamp is rewritten if there are any,
    else written if missing (unless `dry_run`), and dated back before the outputs.

    Missing outputs are Snakemake's to notice.
    """
    existing = [output for output in outputs if output.path.exists()]
    stale = [
        StaleOutput(output.path, reason)
        for output in existing
        if (reason := output.stale_reason()) is not None
    ]
    if stale:
        write_json(
            stamp,
            {
                "noticed_ns": time.time_ns(),
                "stale": {str(item.path): item.reason for item in stale},
            },
        )
    else:
        if not stamp.is_file() and not dry_run:
            write_json(stamp, {"noticed_ns": None, "stale": {}})
        if existing and stamp.is_file():
            _date_back(stamp, min(output.path.stat().st_mtime_ns for output in existing))
    return stale


def _date_back(stamp: Path, oldest_output_ns: int) -> None:
    """Make the stamp older than the oldest output, unless it already is."""
    if stamp.stat().st_mtime_ns >= oldest_output_ns:
        earlier = oldest_output_ns - 1_000_000_000
        os.utime(stamp, ns=(earlier, earlier))


def stamp_input(stamp: Path) -> list[str]:
    """The job's stamp as a list of inputs: empty until the first plan wrote it."""
    return [str(stamp)] if stamp.is_file() else []


def describe(stale: list[StaleOutput], shown: int = 10) -> str:
    """A message for the person running the workflow: how many outputs each reason (each
    changed setting, with its values) makes stale, then the outputs."""
    lines = [f"{len(stale)} existing output(s) are not current and will be rebuilt:"]
    reasons: dict[str, int] = {}
    for item in stale:
        reasons[item.reason] = reasons.get(item.reason, 0) + 1
    if len(stale) > 1:
        lines += [f"  {count} because {reason}" for reason, count in reasons.items()]
    lines += [f"  {item.path}: {item.reason}" for item in stale[:shown]]
    if len(stale) > shown:
        lines.append(f"  ... and {len(stale) - shown} more")
    return "\n".join(lines)
