"""What a run of the workflow has done and is doing, for its console (bouquet_eval.command.console).

When a run starts, the workflow hands the console the jobs it is to run with their outputs
(`PLANNED`, a record of Snakemake's logger, see workflow/rules/hooks.smk). Each stage
(translate, score, aggregate, ...: a rule's name up to its first `_`) is then followed by the
outputs its jobs have written: per direction of a model where its outputs name one (a score
job's direction counts in part until its every file is written), per job otherwise. The
time left in a stage is its pace since its first output, so that what comes before (planning,
starting a job, loading a model) does not count. Between outputs, it says what the run is
doing: which jobs run, and which have ended while Snakemake records their outputs.

Standard library only: Snakemake imports the console when it starts.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bouquet_eval.core.pace import Pace, duration

PLANNED = "bouquet_eval_planned_jobs"
"""The attribute of the logger record by which the workflow hands the console its jobs."""
CLOSING = "bouquet_eval_closing"
"""The attribute of the logger record of a run's last line (what it made, where)."""

TARGETS = {"all", "translations", "scores", "aggregates", "results", "submission", "verify"}
"""Rules that only gather others' outputs: no stage of their own."""

STAGES = (
    "prefetch",
    "translate",
    "judged",
    "score",
    "aggregate",
    "heatmaps",
    "leaderboard",
    "metaeval",
)
"""The stages in the order their jobs run (others after them)."""

_CODE = r"[a-z]{2,3}_[A-Z][a-z]{3}(?:_[a-z0-9]+)?"
DIRECTION = re.compile(rf"({_CODE}-{_CODE})\.")
"""A direction's outputs are named after it: `<src>-<tgt>.jsonl`, `<src>-<tgt>.parquet`."""

METRIC_FOLDER = "by-metric"
"""A model's folder of each metric's scores (`<model>/by-metric/<metric>/<direction>...`)."""


@dataclass(frozen=True)
class PlannedJob:
    rule: str
    outputs: tuple[str, ...]
    benchmark: str | None
    label: str = ""
    """How the console names it: its rule, and its wildcards' values (`heatmaps m3`)."""
    kept: frozenset[str] = frozenset()
    """Its outputs that Snakemake keeps when the job starts (`update()`: a job redoes only
    those not current); it removes the others."""

    @property
    def name(self) -> str:
        return self.label or self.rule


def planned_jobs(jobs: Iterable[Any]) -> dict[int, PlannedJob]:
    """Snakemake's jobs of a run (`workflow.dag.needrun_jobs()`), as the console follows them."""
    from snakemake.io import is_flagged

    return {
        job.jobid: PlannedJob(
            job.rule.name,
            tuple(map(str, job.output)),
            str(job.benchmark) if job.benchmark else None,
            " ".join([job.rule.name, *map(str, job.wildcards_dict.values())]),
            frozenset(str(path) for path in job.output if is_flagged(path, "update")),
        )
        for job in jobs
    }


STAGE_NAMES = {"metaeval_inputs": "judged"}
"""Rules whose stage is not named by their first word: the judged systems' translations, laid
out for the score jobs (before them), apart from the meta-evaluation's statistics (after)."""


def stage_of(rule: str) -> str:
    """translate_<model>_shard0of2 -> translate."""
    return STAGE_NAMES.get(rule, rule.split("_", 1)[0])


def unit_of(path: str, jobid: int) -> tuple[str, str]:
    """What an output counts towards: the direction of a model's folder that it names, or
    else its job."""
    found = DIRECTION.match(os.path.basename(path))
    if found is None:
        return ("job", str(jobid))
    folder = Path(path).parent
    if folder.parent.name == METRIC_FOLDER:
        folder = folder.parent.parent
    return (str(folder), found.group(1))


@dataclass
class Stage:
    name: str
    units: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    """Each unit's outputs that are still to be written."""
    sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    pace: Pace | None = None

    @property
    def per_direction(self) -> bool:
        return all(key[0] != "job" for key in self.units)

    def done(self) -> float:
        return sum(1 - len(self.units[key]) / self.sizes[key] for key in self.units)

    def line(self) -> str:
        done, total = int(self.done() + 1e-9), len(self.units)
        part = f"{self.name} {done}/{total}{' directions' if self.per_direction else ''}"
        left = self.pace.left() if self.pace else None
        return part + (f" (about {duration(left)} left)" if left is not None else "")


@dataclass
class Running:
    started: float
    """Wall-clock time (time.time) of the job's start, as its benchmark file's is."""
    since: float
    """Its start on the tracker's clock."""


class RunTracker:
    """The stages of a run and its running jobs, from the jobs planned and Snakemake's job
    events; `poll` reads which outputs of running jobs are written."""

    def __init__(
        self, jobs: Mapping[int, PlannedJob], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.jobs = dict(jobs)
        self.clock = clock
        self.stages: dict[str, Stage] = {}
        self.owners: dict[str, tuple[Stage, tuple[str, str]]] = {}
        """Each output to follow: its stage and unit."""
        for jobid, job in self.jobs.items():
            if job.rule in TARGETS or not job.outputs:
                continue
            stage = self.stages.setdefault(stage_of(job.rule), Stage(stage_of(job.rule)))
            for path in job.outputs:
                key = unit_of(path, jobid)
                stage.units.setdefault(key, set()).add(path)
                stage.sizes[key] = stage.sizes.get(key, 0) + 1
                self.owners[path] = (stage, key)
        # In the order they run in.
        order = {name: position for position, name in enumerate(STAGES)}
        ranked = sorted(self.stages, key=lambda name: order.get(name, len(order)))
        self.stages = {name: self.stages[name] for name in ranked}
        self.running: dict[int, Running] = {}
        self.ended: set[int] = set()
        # Outputs that Snakemake keeps (update()) count from the start where they are: a job
        # redoes only those not current. It removes the others before their job runs.
        self.poll([path for job in self.jobs.values() for path in job.kept])
        now = clock()
        for stage in self.stages.values():
            stage.pace = Pace(len(stage.units), stage.done())
            stage.pace.observe(stage.done(), now)

    def started(self, jobid: int) -> None:
        if jobid in self.jobs:
            self.running[jobid] = Running(time.time(), self.clock())

    def finished(self, jobid: int) -> None:
        """Every output of the job is written (Snakemake has checked them)."""
        self.running.pop(jobid, None)
        self._written(self.jobs[jobid].outputs if jobid in self.jobs else ())
        self.ended.add(jobid)
        self._observe()

    def failed(self, jobid: int) -> None:
        self.running.pop(jobid, None)
        self.ended.add(jobid)

    def poll(self, paths: Iterable[str] | None = None) -> None:
        """Note the outputs written since (of the running jobs, or `paths`), reading each
        folder once."""
        if paths is None:
            paths = [path for jobid in self.running for path in self.jobs[jobid].outputs]
        by_folder: dict[str, list[str]] = {}
        for path in paths:
            by_folder.setdefault(os.path.dirname(path) or ".", []).append(path)
        for folder, inside in by_folder.items():
            try:
                names = set(os.listdir(folder))
            except OSError:
                continue
            self._written(path for path in inside if os.path.basename(path) in names)
        self._observe()

    def _written(self, paths: Iterable[str]) -> None:
        for path in paths:
            if path in self.owners:
                stage, key = self.owners[path]
                stage.units[key].discard(path)

    def _observe(self) -> None:
        now = self.clock()
        for stage in self.stages.values():
            if stage.pace is not None:
                stage.pace.observe(stage.done(), now)

    def counts(self) -> tuple[int, ...]:
        """Each stage's whole units done: a line is worth printing when they change."""
        return tuple(int(stage.done() + 1e-9) for stage in self.stages.values())

    def complete(self) -> set[str]:
        return {name for name, stage in self.stages.items() if stage.done() >= len(stage.units)}

    def line(self) -> str:
        return ", ".join(stage.line() for stage in self.stages.values())

    def activity(self) -> str:
        """What the run is doing while no output is written: the jobs that run, and those whose
        process has ended (their benchmark file is written) while Snakemake records their
        outputs; else whether Snakemake is between jobs or finishing."""
        now = self.clock()
        recording: list[tuple[str, float]] = []
        working: list[tuple[str, float]] = []
        outputs = 0  # of the jobs being recorded
        for jobid, running in self.running.items():
            job = self.jobs[jobid]
            if _written_since(job.benchmark, running.started):
                recording.append((job.name, now - running.since))
                outputs += len(job.outputs)
            else:
                working.append((job.name, now - running.since))
        parts = []
        if working:
            parts.append(f"running: {_named(working)}")
        if recording:
            parts.append(
                f"Snakemake records the {outputs} outputs of {_named(recording, since=False)}, "
                "whose job has ended"
            )
        if not parts:
            left = [jobid for jobid in self.jobs if jobid not in self.ended]
            parts.append("Snakemake starts the next jobs" if left else "Snakemake ends the run")
        return "; ".join(parts)


def _written_since(path: str | None, since: float) -> bool:
    if path is None:
        return False
    try:
        return os.stat(path).st_mtime >= since - 1
    except OSError:
        return False


def _named(jobs: list[tuple[str, float]], shown: int = 2, since: bool = True) -> str:
    """Rules (with how long they have run), the first `shown` of them, and how many more."""
    jobs = sorted(jobs, key=lambda job: -job[1])
    named = [f"{rule} ({duration(seconds)})" if since else rule for rule, seconds in jobs[:shown]]
    more = len(jobs) - shown
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")
