"""The console of a plain `snakemake` run of the workflow, as Snakemake's logger plugin
`bouquet` (scripts/snakemake_logger_plugin_bouquet, named by the workflow profile).

Snakemake prints every job with its inputs and outputs: at BOUQuET's size about 11,000 lines,
ending with where its own log is. This handler prints instead what a person follows: the
workflow's own lines (what was selected), the job table once (long lines wrapped), a line per
stage when its count of finished jobs moves (at most every `PROGRESS_SECONDS`, with the time
left at the pace so far), each failed job with its log, warnings and errors, and last where
the results are. Everything else is in Snakemake's log file (.snakemake/log/), named at the
end. Under the `bouquet-eval` command, whose own console shows its progress, Snakemake's
output is left as it is (it goes to the command's log).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import textwrap
import time
from typing import Any, TextIO

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from bouquet_eval.core.home import COMMAND_VARIABLE
from bouquet_eval.translation.translate import duration

PROGRESS_SECONDS = 10.0
WIDTH = 100
PREFIX = "bouquet-eval:"
# Snakemake's own answers to what was asked, shown as they are.
PASSED = ("Nothing to be done", "Congratulations", "Report created", "Lints for", "Unlocked")
# Rows of Snakemake's job table that are no stage: the sum, and the targets that only gather.
TARGETS = {"total", "all", "translations", "scores", "aggregates"}
# Resources Snakemake works out from others (or sets for every job): left out of a dry run's lines.
DERIVED_RESOURCES = {"tmpdir", "mem", "mem_mib", "disk", "disk_mib", "_cores", "_nodes"}


def stage_of(rule: str) -> str:
    """translate_<model>_shard0of2 -> translate."""
    return rule.split("_", 1)[0]


def without_shard(rule: str) -> str:
    """score_metrics_gpu_<model>_shard0of2 -> score_metrics_gpu_<model>."""
    return re.sub(r"_shard\d+of\d+$", "", rule)


class ConsoleHandler(LogHandlerBase):
    """A line per stage, the failures, and where the results are (see the module docstring)."""

    def __post_init__(self) -> None:
        self.stream: TextIO = sys.stdout if self.common_settings.stdout else sys.stderr
        self.under_command = bool(os.environ.get(COMMAND_VARIABLE))
        if self.under_command:
            from snakemake.logging import DefaultFilter, DefaultFormatter
            from snakemake.settings.enums import Quietness

            settings: Any = self.common_settings
            # Without each job's block (thousands of paths per job at the benchmark's size),
            # unless a --quiet of one's own says otherwise.
            quiet = settings.quiet or {Quietness.RULES}
            self.addFilter(
                DefaultFilter(
                    quiet,
                    settings.debug_dag,
                    settings.verbose,
                    settings.dryrun,
                    settings.printshellcmds,
                )
            )
            self.setFormatter(DefaultFormatter(quiet, settings.show_failed_logs))
        self.rules: dict[int, str] = {}
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.started = time.monotonic()
        self.printed = 0.0
        self.table_shown = False
        self.results: list[str] = []
        # A dry run's jobs by rule (shards taken together) and what each asks for.
        self.asked: dict[tuple[str, str], int] = {}

    writes_to_stream = True
    writes_to_file = False
    has_filter = True
    has_formatter = True
    needs_rulegraph = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.under_command:
                if self.filter(record):
                    self.write(self.format(record))
            else:
                self.handle_event(record)
        except Exception:  # a console line is never worth a failed run
            self.handleError(record)

    def write(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def handle_event(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        message = record.getMessage() if record.msg is not None else ""
        if event == LogEvent.RUN_INFO:
            self.run_info(getattr(record, "stats", {}) or {}, message)
        elif event == LogEvent.JOB_INFO:
            rule = str(getattr(record, "rule_name", ""))
            self.rules[int(getattr(record, "jobid", -1))] = rule
            if self.common_settings.dryrun:
                self.count_asked(rule, record)
        elif event == LogEvent.JOB_FINISHED:
            self.finished(int(getattr(record, "job_id", -1)))
        elif event == LogEvent.JOB_ERROR:
            rule = getattr(record, "rule_name", "?")
            logs = getattr(record, "log", "") or "none"
            self.write(f"{PREFIX} job {getattr(record, 'jobid', '?')} ({rule}) failed; log: {logs}")
        elif message.startswith("Complete log(s): "):
            self.write(f"Snakemake's full log: {message.split(': ', 1)[1]}")
            self.write_results()
        elif message.startswith(f"{PREFIX} results in "):
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

    def close(self) -> None:
        self.write_asked()
        self.write_results()
        super().close()

    def run_info(self, stats: dict[str, Any], table: str) -> None:
        """The job table, once (Snakemake logs it again at the end of a dry run): a dry run's
        as Snakemake writes it (rule by rule), a run's as one line per stage."""
        self.totals = {}
        for rule, count in stats.items():
            if rule not in TARGETS:
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
        text = f"{PREFIX} {total} jobs to run: {jobs}"
        self.write(textwrap.fill(text, WIDTH, subsequent_indent="    "))

    def finished(self, jobid: int) -> None:
        stage = stage_of(self.rules.get(jobid, "?"))
        self.done[stage] = self.done.get(stage, 0) + 1
        complete = self.done[stage] >= self.totals.get(stage, 0)
        now = time.monotonic()
        if complete or now - self.printed >= PROGRESS_SECONDS:
            self.printed = now
            self.write(self.progress_line(now))

    def progress_line(self, now: float) -> str:
        parts = []
        for stage, total in self.totals.items():
            done = self.done.get(stage, 0)
            part = f"{stage} {done}/{total}"
            if 0 < done < total:
                left = (now - self.started) / done * (total - done)
                part += f" (about {duration(left)} left)"
            parts.append(part)
        return textwrap.fill(f"{PREFIX} jobs done: " + ", ".join(parts), WIDTH,
                             subsequent_indent="    ")  # fmt: skip
