"""Snakemake's main process, made to cost what changes instead of what waits.

Snakemake 9.27's main process spends its CPU time, once the workflow is planned, in two places
whose cost does not follow the work done:
- **Scheduler rounds** (`snakemake.scheduling.job_scheduler.JobScheduler`). A round runs
  whenever a job finishes, and each calls `update_input_sizes` on every job that is ready,
  whether or not a core is free: an asyncio task per input path, each an `exists` and a `size`
  (two `stat` calls or more; Snakemake's I/O cache is off while jobs run). The sizes only rank
  jobs against each other (the greedy scheduler prefers larger inputs), and the inputs of a
  ready job were all written by jobs that have finished: they do not change while it waits.
  And when a job rate limit is set (`--max-jobs-per-timespan`, 100/1s by default), each round
  arms a timer that starts another one after the timespan, whether or not the limit held
  anything back: a round a second for as long as any job runs. So the process's CPU time grew
  with the wall time times the inputs of the jobs that wait for a core (at BOUQuET's size, two
  waiting score jobs of 265 inputs: 530 paths a second for the whole run; on a cluster with
  hundreds of queued jobs, far more).
- **Records of a finished job** (`snakemake.persistence.PersistenceBase.finished`). For each
  output it asks every input for its checksum, which checks the input's existence, kind and
  size (three `stat` calls and more) even where it hashes nothing (the workflow sets
  `max-checksum-file-size: 0`): outputs times inputs, 565,000 checks for a score job of 531
  directions, though the answers are the same for every output of the job.

`apply_to_run` changes the objects of one run (the workflow's `onstart` calls it; Snakemake's
classes, and so every other run, are left alone):
- the scheduler reads a path's size once, when a job that reads it first becomes ready, and
  keeps it while ready jobs read it (as Snakemake keeps sizes, up to 10,000 paths);
- the scheduler's timer is armed only after a round in which the rate limit was reached (or
  while queue inputs, which are polled, are in the run): that is when a round after the
  timespan can start what the last one could not. Every other round still happens: a job that
  finishes, fails or is cancelled releases one;
- the records of a finished job ask each input for its checksum once, not once per output.
The records written, and the jobs chosen, are Snakemake's own.

It is a patch carried by the workflow until Snakemake does this itself (the proposal, with the
change to Snakemake's code: docs/upstream/snakemake-main-process.md). It applies only to the
code it was written against: where the source of a method it replaces or relies on is not the
one recorded in `PATCHED_SOURCES` (another Snakemake version), that part is left as it is, and
the run says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from collections.abc import Callable, Iterable
from typing import Any

WRITTEN_FOR = "9.27.1"
"""The Snakemake version the patch was written against (pyproject.toml pins it)."""

PATCHED_SOURCES = {
    "JobScheduler.schedule": "9f32db93a39bd96f",
    "JobScheduler.update_input_sizes": "3d3d19efdbbe3267",
    "JobScheduler.job_selector": "11a654075403acf2",
    "JobScheduler._schedule_reevalutation": "bb09f100ea5766bb",
    "PersistenceBase.finished": "3f347851a55e2243",
}
"""sha256 (first 16 digits) of the source of each method the patch replaces or whose calls it
relies on (`schedule` calls the scheduler's three), in Snakemake 9.27.1."""

KEPT_SIZES = 10_000
"""Paths whose sizes are kept while no ready job reads them (Snakemake's own bound)."""


def source_digest(function: Callable[..., Any]) -> str:
    """The first 16 hex digits of the sha256 of a function's source."""
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


def changed_sources(
    classes: dict[str, type], sources: dict[str, str] = PATCHED_SOURCES
) -> list[str]:
    """The methods of `sources` (`Class.method`: digest, the classes by name in `classes`)
    whose source is not the one a patch was written against."""
    changed = []
    for name, digest in sources.items():
        owner, method = name.split(".")
        function = getattr(classes[owner], method, None)
        if function is None or source_digest(function) != digest:
            changed.append(name)
    return changed


def apply_to_run(workflow: Any) -> list[str]:
    """Patch this run's scheduler and records (see the module docstring); the methods left
    as they are because their source is not the one the patch was written against (each part
    is applied whole or not at all)."""
    from snakemake.persistence import PersistenceBase
    from snakemake.scheduling.job_scheduler import JobScheduler

    changed = changed_sources({"JobScheduler": JobScheduler, "PersistenceBase": PersistenceBase})
    if not any(name.startswith("JobScheduler.") for name in changed):
        _LeanRounds(workflow.scheduler).install()
    if "PersistenceBase.finished" not in changed:
        persistence = workflow.persistence
        persistence.finished = _InputsHashedOnce(persistence).finished
    return changed


def unpatched_message(
    unpatched: list[str],
    patch: str = "the workflow's patch of its main process",
    cost: str = "its main process costs more CPU while jobs wait for cores",
) -> str:
    """What a run says when a patch (`apply_to_run`'s unless named) left methods as they are,
    why, and what the run costs without it."""
    from snakemake import __version__

    return (
        f"bouquet-eval: snakemake {__version__}'s {', '.join(unpatched)} differ from the code "
        f"of snakemake {WRITTEN_FOR}, which {patch} was written for: left as they are (the "
        f"run is Snakemake's own; {cost}). Install snakemake=={WRITTEN_FOR}, the version "
        "pyproject.toml pins, to have it."
    )


class _LeanRounds:
    """What `apply_to_run` puts in place of three methods of one scheduler."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.select = scheduler.job_selector
        self.rearm = scheduler._schedule_reevalutation
        self.limit_reached = False

    def install(self) -> None:
        self.scheduler.update_input_sizes = self.update_input_sizes
        self.scheduler.job_selector = self.job_selector
        self.scheduler._schedule_reevalutation = self.schedule_reevaluation

    async def update_input_sizes(self, jobs: Iterable[Any]) -> None:
        """Snakemake's `update_input_sizes`, reading only the paths it does not know yet."""
        sizes: dict[Any, int | None] = self.scheduler._input_sizes
        read = {path for job in jobs for path in job.input}
        unknown = [path for path in read if path not in sizes]

        async def size(path: Any) -> tuple[Any, int | None]:
            return path, await path.size() if await path.exists() else None

        if unknown:
            sizes.update(await asyncio.gather(*[size(path) for path in unknown]))
        if len(sizes) > KEPT_SIZES:
            for path in [path for path in sizes if path not in read]:
                del sizes[path]

    def job_selector(self, jobs: Any) -> Any:
        """Snakemake's `job_selector`, noting whether the job rate limit was reached."""
        selected = self.select(jobs)
        limiter = self.scheduler.job_rate_limiter
        self.limit_reached = limiter is not None and limiter.get_free_jobs() == 0
        return selected

    def schedule_reevaluation(self, delay: int) -> None:
        """Snakemake's timed round, armed only when it can start something a finished job's
        round would not: after the rate limit was reached, or while queue inputs are polled."""
        if self.limit_reached or self.scheduler.workflow.dag.queue_input_jobs:
            self.rearm(delay)


class _InputsHashedOnce:
    """`PersistenceBase.finished` of Snakemake 9.27.1 (MIT licence, Johannes Köster and
    contributors) with one change: the input checksums, the same for every output of a job,
    are asked for once per job instead of once per output."""

    def __init__(self, persistence: Any) -> None:
        self.persistence = persistence

    async def finished(self, job: Any) -> None:
        from snakemake.persistence import RECORD_FORMAT_VERSION, MetadataRecord
        from snakemake.settings.types import ExecMode

        persistence = self.persistence
        persistence._clear_cache()
        workflow = persistence.dag.workflow

        if not workflow.execution_settings.keep_metadata:
            for f in job.output:
                persistence._unmark_incomplete(persistence._get_key(f))
            return

        if (
            workflow.exec_mode == ExecMode.DEFAULT
            or workflow.remote_execution_settings.immediate_submit
        ):
            code = persistence._code(job.rule)
            input_files = persistence._input(job)
            log_files = persistence._log(job)
            params = persistence._params(job)
            shellcmd = job.shellcmd
            conda_env = persistence._conda_env(job)
            software_stack_hash = persistence._software_stack_hash(job)
            fallback_time = time.time()
            job_hash_val = hash(job)
            # The change: once per job (Snakemake asks for them inside the loop below).
            checksums = {
                str(infile): await infile.checksum(persistence.max_checksum_file_size)
                for infile in job.input
            }
            checksums = {k: v for k, v in checksums.items() if v is not None}

            for f in job.output:
                key = persistence._get_key(f)
                endtime = (
                    (await f.mtime()).local_or_storage() if await f.exists() else fallback_time
                )

                record = persistence._read_record(key) or MetadataRecord()

                record.starttime = persistence._get_recorded_starttime(key) or fallback_time

                record.incomplete = False
                record.record_format_version = RECORD_FORMAT_VERSION
                record.rule = job.rule.name
                record.code = code
                record.input = input_files
                record.log = log_files
                record.params = params
                record.shellcmd = shellcmd
                record.endtime = endtime
                record.job_hash = job_hash_val
                record.conda_env = conda_env
                record.software_stack_hash = software_stack_hash
                record.container_img_url = job.container_img_url
                record.input_checksums = dict(checksums)

                persistence._write_record(key, record)

        for f in job.output:
            persistence._unmark_incomplete(persistence._get_key(f))
