"""The console of a plain `snakemake` run of the workflow, as Snakemake's logger plugin
`bouquet` (scripts/snakemake_logger_plugin_bouquet, named by the workflow profile), and the
progress lines of the `bouquet-eval` command's console.

Snakemake prints every job with its inputs and outputs: at BOUQuET's size about 11,000 lines,
ending with where its own log is. This handler prints instead what a person follows: the
workflow's own lines (what was selected), the job table once (long lines wrapped), a line per
stage when its count of directions (or jobs) done moves (at most every `PROGRESS_SECONDS`,
with the time left at the pace since the stage's first output: bouquet_eval.command.tracker),
at least a line every `HEARTBEAT_SECONDS` saying what the run is doing (the jobs running, the
outputs Snakemake records once a job has ended, a report being written), each failed job with
its log, warnings and errors, and last where the results are. Everything else is in
Snakemake's log file (.snakemake/log/), named at the end. Under the `bouquet-eval` command,
Snakemake's output is left as it is (it goes to the command's log), and the progress lines go
to the command's console (`COMMAND_CONSOLE`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from bouquet_eval.command.tracker import CLOSING, PLANNED, TARGETS, RunTracker, stage_of
from bouquet_eval.core.home import COMMAND_VARIABLE
from bouquet_eval.core.pace import duration

PROGRESS_SECONDS = 10.0
"""At most a progress line this often (plain `snakemake`), but when a stage completes."""
COMMAND_PROGRESS_SECONDS = 5.0
"""The same on the `bouquet-eval` command's console, which shows nothing else meanwhile."""
HEARTBEAT_SECONDS = 20.0
"""After this long without a line, a line saying what the run is doing."""
POLL_SECONDS = 2.0
"""How often the outputs of running jobs are looked for."""
WIDTH = 100
PREFIX = "bouquet-eval:"
# Snakemake's own answers to what was asked, shown as they are.
PASSED = ("Nothing to be done", "Congratulations", "Report created", "Lints for", "Unlocked")
# Resources Snakemake works out from others (or sets for every job): left out of a dry run's lines.
DERIVED_RESOURCES = {"tmpdir", "mem", "mem_mib", "disk", "disk_mib", "_cores", "_nodes"}


@dataclass
class CommandConsole:
    """The `bouquet-eval` command's console, while it runs Snakemake in its own process
    (whose output then goes to the command's log): where the progress lines go, after what
    `first` writes (the selection's line)."""

    stream: TextIO
    first: Callable[[], None]
    spoken: float = field(default_factory=time.monotonic)
    """When it last got a line: the heartbeat counts from there, across Snakemake's runs."""


COMMAND_CONSOLE: CommandConsole | None = None


def without_shard(rule: str) -> str:
    """score_metrics_gpu_<model>_shard0of2 -> score_metrics_gpu_<model>."""
    return re.sub(r"_shard\d+of\d+$", "", rule)


class ConsoleHandler(LogHandlerBase):
    """A line per stage, the failures, and where the results are (see the module docstring)."""

    def __post_init__(self) -> None:
        self.under_command = bool(os.environ.get(COMMAND_VARIABLE))
        # Progress goes to the console a person reads: the command's own, or Snakemake's.
        self.stream: TextIO = sys.stdout if self.common_settings.stdout else sys.stderr
        self.command = COMMAND_CONSOLE if self.under_command else None
        self.console: TextIO | None = self.command.stream if self.command else None
        if not self.under_command:
            self.console = self.stream
        if self.under_command:
            from snakemake.logging import DefaultFilter, DefaultFormatter
            from snakemake.settings.enums import Quietness

            settings: Any = self.common_settings
            # Without each job's block (thousands of paths per job at the benchmark's size),
            # unless a --quiet of one's own says otherwise.
            quiet = settings.quiet or {Quietness.RULES}
            # Applied to what goes to the log only: the console follows every job's record.
            self.shown = DefaultFilter(
                quiet,
                settings.debug_dag,
                settings.verbose,
                settings.dryrun,
                settings.printshellcmds,
            )
            self.setFormatter(DefaultFormatter(quiet, settings.show_failed_logs))
        self.totals: dict[str, int] = {}
        self.started = time.monotonic()
        self.table_shown = False
        self.results: list[str] = []
        # A dry run's jobs by rule (shards taken together) and what each asks for.
        self.asked: dict[tuple[str, str], int] = {}
        # What the run has done and is doing, once the workflow has said which jobs it runs.
        self.tracker: RunTracker | None = None
        self.guard = threading.RLock()
        self.spoken = self.started  # when the console last got a line
        self.progressed = 0.0  # when the last progress line was written
        self.counted: tuple[int, ...] = ()
        self.stopping = threading.Event()
        self.ticker = threading.Thread(target=self.tick, name="bouquet-eval console", daemon=True)
        self.ticker.start()

    writes_to_stream = True
    writes_to_file = False
    has_filter = True
    has_formatter = True
    needs_rulegraph = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            with self.guard:
                self.follow(record)
                if self.under_command:
                    if self.shown.filter(record):
                        self.write(self.format(record), self.stream, spoken=False)
                else:
                    self.handle_event(record)
        except Exception:  # a console line is never worth a failed run
            self.handleError(record)

    def write(self, text: str, stream: TextIO | None = None, spoken: bool = True) -> None:
        stream = stream or self.console
        if stream is None:
            return
        try:
            # Written whole, below Python's stream: this thread (Snakemake's logging, or the
            # console's clock) never shares the stream's buffer with the main thread's prints,
            # which a concurrent write could garble or repeat.
            os.write(stream.fileno(), f"{text}\n".encode())
        except (OSError, ValueError, AttributeError):  # no file descriptor (a test's stream)
            stream.write(text + "\n")
            stream.flush()
        if spoken:
            self.spoken = time.monotonic()
            if self.command is not None:
                self.command.spoken = self.spoken

    def follow(self, record: logging.LogRecord) -> None:
        """Keep the tracker up to date with the run's jobs (both consoles)."""
        planned = getattr(record, PLANNED, None)
        if planned is not None and not self.common_settings.dryrun:
            self.tracker = RunTracker(planned)
            self.counted = self.tracker.counts()
            if self.command is not None:
                self.command.first()
                self.write(f"{PREFIX} {self.tracker.line()}")
            return
        if self.command is not None and record.getMessage().startswith("Nothing to be done"):
            self.command.first()
            self.write(f"{PREFIX} nothing to do: every output is current")
        if self.tracker is None:
            return
        event = getattr(record, "event", None)
        if event == LogEvent.JOB_INFO:
            self.tracker.started(int(getattr(record, "jobid", -1)))
        elif event == LogEvent.JOB_FINISHED:
            self.tracker.finished(int(getattr(record, "job_id", -1)))
            self.progress()
        elif event == LogEvent.JOB_ERROR:
            self.tracker.failed(int(getattr(record, "jobid", -1)))

    def tick(self) -> None:
        """Every second: look for outputs, print progress as it moves, and say what the run is
        doing when nothing was said for `HEARTBEAT_SECONDS`."""
        polled = 0.0
        while not self.stopping.wait(1.0):
            with self.guard:
                now = time.monotonic()
                if self.tracker is not None and now - polled >= POLL_SECONDS:
                    polled = now
                    self.tracker.poll()
                    self.progress()
                spoken = self.command.spoken if self.command is not None else self.spoken
                if now - spoken >= HEARTBEAT_SECONDS:
                    self.heartbeat(now)

    def progress(self) -> None:
        """A progress line when a count moved: at once when a stage completes, else at most
        every PROGRESS_SECONDS."""
        if self.tracker is None:
            return
        counts = self.tracker.counts()
        if counts == self.counted:
            return
        every = COMMAND_PROGRESS_SECONDS if self.under_command else PROGRESS_SECONDS
        now = time.monotonic()
        completed = self.tracker.complete() - self.completed(self.counted)
        if completed or now - self.progressed >= every:
            self.counted = counts
            self.progressed = now
            self.write(self.wrapped(f"{PREFIX} {self.tracker.line()}"))

    def wrapped(self, text: str) -> str:
        """Long lines wrapped on plain Snakemake's console (the command's are a line each)."""
        if self.command is not None:
            return text
        return textwrap.fill(text, WIDTH, subsequent_indent="    ")

    def completed(self, counts: tuple[int, ...]) -> set[str]:
        assert self.tracker is not None
        stages = self.tracker.stages.values()
        return {s.name for s, count in zip(stages, counts, strict=False) if count >= len(s.units)}

    def heartbeat(self, now: float) -> None:
        if self.tracker is not None:
            self.tracker.poll()
            text = f"{self.tracker.line()}; {self.tracker.activity()}"
        else:
            doing = (
                "writes the report" if "--report" in sys.argv else "reads the workflow and plans"
            )
            text = f"Snakemake {doing} ({duration(now - self.started)} so far)"
        self.write(self.wrapped(f"{PREFIX} {text}"))

    def close(self) -> None:
        self.stopping.set()
        if self.ticker.is_alive() and threading.current_thread() is not self.ticker:
            self.ticker.join(2.0)
        if not self.under_command:
            self.write_asked()
            self.write_results()
        super().close()

    def handle_event(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        message = record.getMessage() if record.msg is not None else ""
        if getattr(record, PLANNED, None) is not None:
            return  # the job table said it
        if event == LogEvent.RUN_INFO:
            self.run_info(getattr(record, "stats", {}) or {}, message)
        elif event == LogEvent.JOB_INFO:
            if self.common_settings.dryrun:
                self.count_asked(str(getattr(record, "rule_name", "")), record)
        elif event == LogEvent.JOB_ERROR:
            rule = getattr(record, "rule_name", "?")
            logs = getattr(record, "log", "") or "none"
            self.write(f"{PREFIX} job {getattr(record, 'jobid', '?')} ({rule}) failed; log: {logs}")
        elif message.startswith("Complete log(s): "):
            self.write(f"Snakemake's full log: {message.split(': ', 1)[1]}")
            self.write_results()
        elif getattr(record, CLOSING, False):
            self.results.append(message)  # the last line, after the log's
        elif (
            message.startswith(PREFIX)
            or record.levelno >= logging.WARNING
            or message.startswith(PASSED)
        ):
            self.write(message)

    def count_asked(self, rule: str, record: logging.LogRecord) -> None:
        from snakemake.logging import format_resources

        resources = {
            name: value
            for name, value in (getattr(record, "resources", None) or {}).items()
            if name not in DERIVED_RESOURCES
        }
        asked = f"threads {getattr(record, 'threads', '?')}"
        if resources:
            asked += f", {format_resources(resources)}"
        key = (without_shard(rule), asked)
        self.asked[key] = self.asked.get(key, 0) + 1

    def write_asked(self) -> None:
        """What each family of a dry run's jobs asks for, a line per rule (shards together):
        CPU and GPU score jobs apart, each with its resources."""
        if self.asked:
            self.write(f"{PREFIX} what the jobs ask for:")
        for (rule, asked), count in self.asked.items():
            line = f"    {rule}: {count} job{'s' if count > 1 else ''}, {asked}"
            self.write(textwrap.fill(line, WIDTH, subsequent_indent="        "))
        self.asked = {}

    def write_results(self) -> None:
        for line in self.results:
            self.write(line)
        self.results = []

    def run_info(self, stats: dict[str, Any], table: str) -> None:
        """The job table, once (Snakemake logs it again at the end of a dry run): a dry run's
        as Snakemake writes it (rule by rule), a run's as one line per stage."""
        self.totals = {}
        for rule, count in stats.items():
            if rule not in TARGETS and rule != "total":
                stage = stage_of(rule)
                self.totals[stage] = self.totals.get(stage, 0) + int(count)
        if self.table_shown:
            self.write_asked()  # a dry run's second table comes after its jobs
            return
        self.table_shown = True
        if self.common_settings.dryrun:
            self.write(table.rstrip())
            return
        jobs = ", ".join(f"{stage} {count}" for stage, count in self.totals.items())
        total = sum(self.totals.values())
        self.write(self.wrapped(f"{PREFIX} {total} jobs to run: {jobs}"))
