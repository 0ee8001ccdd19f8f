"""Helpers for the thin scripts that Snakemake rules run."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from bouquet_eval.core.home import COMMAND_VARIABLE
from bouquet_eval.core.secrets import known_secrets, scrub

SnakemakeJob = Any
"""The `snakemake` object of a rule script (snakemake.script.Snakemake), whose inputs, outputs
and params are named by the rule at run time.

Snakemake's preamble defines it in the script it runs, and sets `__file__` to the rule script
itself. A child process started with `spawn` (vLLM's engine core always is on CPU, and on CUDA
once CUDA is initialised) re-imports that file as `__mp_main__`, without the preamble: each rule
script therefore reads `snakemake` and does its job only under `if __name__ == "__main__"`.
"""

# Relative to the working directory, which all jobs of a run on one machine share.
GPU_LEASES = Path(".snakemake") / "bouquet-eval-gpu-leases"


@contextlib.contextmanager
def job_logging(
    log_path: str | Path, secrets: Iterable[str] | None = None
) -> Iterator[logging.Logger]:
    """Log to the job's log file (and stderr), every secret the run knows redacted.

    A failure is logged with its traceback, then in one line, the last of the log and of the
    job's stderr: what a user reads first. The process then exits with status 1, without
    Python printing the traceback a second time.

    `secrets`: by default those of the configuration of the Snakemake job running this
    process (see `secrets.known_secrets`). They are redacted from every record, tracebacks
    included, and from the exception that leaves the job.
    """
    secrets = _job_secrets() if secrets is None else frozenset(secrets)
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    # Emptied once; then appended to by the handler and by what the job's children print.
    Path(log_path).write_bytes(b"")
    children = contextlib.ExitStack()
    stderr = children.enter_context(_children_output_to(Path(log_path), secrets))
    console = logging.StreamHandler(stderr)
    # Under plain Snakemake the job's progress stays in its log, and the console shows the
    # workflow's own lines (bouquet_eval.command.console): stderr gets warnings and errors.
    # The `bouquet-eval` command keeps everything a job prints in its own log file.
    console.setLevel(logging.INFO if os.environ.get(COMMAND_VARIABLE) else logging.WARNING)
    handlers: list[logging.Handler] = [
        logging.FileHandler(log_path, mode="a", encoding="utf-8"),
        console,
    ]
    formatter = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", secrets)
    for handler in handlers:
        handler.setFormatter(formatter)
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True)
    # HTTP clients log every request at INFO: thousands of lines that say nothing.
    for chatty in ("httpx", "httpx2", "httpcore", "httpcore2", "openai"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    logger = logging.getLogger("bouquet_eval")
    try:
        yield logger
    except JobFailure as failure:  # what the job found and says whole: no traceback
        logger.error("job failed: %s", failure)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        # Ctrl-C: the job ends now. Python's own end, which collects every object of torch
        # and vLLM, takes tens of seconds on a busy machine; outputs are written atomically,
        # and the log is complete once flushed.
        logger.error("job stopped (interrupted)")
        for handler in handlers:
            handler.flush()
        children.close()
        os._exit(INTERRUPTED_EXIT_STATUS)
    except SystemExit as stop:
        logger.exception("job stopped")
        clean = _without_secrets(stop, secrets)
        if clean is stop:
            raise
        raise clean from None
    except BaseException as error:  # errors, and interruptions such as a stalled translator
        # What the children printed goes into the log first, before the traceback that says
        # their cause is "above": copied later, it would come after it, where `root_cause`
        # does not look (the copier thread runs behind on a busy machine).
        children.close()
        logger.exception("job failed")
        cause = root_cause(Path(log_path), error)
        logger.error("job failed: %s%s", one_line(error), f"; root cause: {cause}" if cause else "")
        raise SystemExit(1) from _without_secrets(error, secrets)
    finally:
        for handler in handlers:
            handler.flush()
        children.close()


INTERRUPTED_EXIT_STATUS = 130
"""A job's exit status when Ctrl-C stopped it (128 + SIGINT, as a shell reports it)."""


class JobFailure(Exception):
    """A failure that is the job's finding, not a fault (a claimed score that does not hold):
    its message says it all, in one line, and is logged without a traceback."""


DRAIN_SECONDS = 1.0
"""How long a job's end waits for its children's last output to be copied to its log."""


@contextlib.contextmanager
def _children_output_to(log_path: Path, secrets: frozenset[str]) -> Iterator[TextIO]:
    """Copy what this process's children print (and what is written to its stderr below
    Python, by C libraries) to the job's log as well as to its stderr, secrets redacted in the
    log; yield a stream on the job's own stderr for this process's records, which its log has
    already.

    A child such as vLLM's engine core prints why it failed on its stderr, and its parent only
    that it did ("See root cause above"): in the job's log, the reason is beside the failure.
    Python's `sys.stderr` goes on writing to the job's stderr (a terminal stays one, for
    progress bars). At the end, what children printed is copied for up to `DRAIN_SECONDS`;
    children still running then (an engine that stops at exit) go on being copied meanwhile.
    """
    original = os.dup(2)
    reading, writing = os.pipe()
    sys.stderr.flush()
    os.dup2(writing, 2)
    os.close(writing)
    saved_stderr = sys.stderr
    stream = open(original, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115

    def copy() -> None:
        with open(reading, "rb") as pipe, open(log_path, "ab") as log:
            for line in pipe:
                os.write(original, line)
                log.write(scrub(line.decode("utf-8", errors="replace"), secrets).encode("utf-8"))
                log.flush()

    copier = threading.Thread(target=copy, name="children's output", daemon=True)
    copier.start()
    sys.stderr = stream
    try:
        yield stream
    finally:
        stream.flush()
        sys.stderr = saved_stderr
        os.dup2(original, 2)  # the pipe ends when the last child holding it has closed it
        copier.join(DRAIN_SECONDS)


class RedactingFormatter(logging.Formatter):
    """Formats records, then replaces each known secret in the text: a secret can come in any
    part of a record (its message, arguments, exception or stack)."""

    def __init__(self, fmt: str, secrets: frozenset[str]) -> None:
        super().__init__(fmt)
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record), self.secrets)


class RedactedError(Exception):
    """Stands for an error whose message or traceback showed a secret: its type and message,
    secrets redacted (the job's log has its traceback, redacted too)."""


def _without_secrets(error: BaseException, secrets: frozenset[str]) -> BaseException:
    """`error`, or where what Python would print of it shows a secret, a stand-in that does
    not: an interruption stays one of its type, since that decides the exit status."""
    shown = "".join(traceback.format_exception(error))
    if scrub(shown, secrets) == shown:
        return error
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        arguments = (scrub(a, secrets) if isinstance(a, str) else a for a in error.args)
        return (SystemExit if isinstance(error, SystemExit) else KeyboardInterrupt)(*arguments)
    return RedactedError(scrub(one_line(error), secrets))


def _job_secrets() -> frozenset[str]:
    # Rule scripts give only their log; Snakemake runs each one as __main__ with a `snakemake`
    # object holding the run's configuration, which names the variables that hold secrets.
    job = getattr(sys.modules.get("__main__"), "snakemake", None)
    return known_secrets(getattr(job, "config", None) or {})


ROOT_CAUSE_ABOVE = "root cause above"
"""How an error says that the reason is what a child process printed (vLLM's engine core)."""

_ERROR_LINE = re.compile(r"^(?:\([^)]*pid=\d+\)\s+)?(?:[\w.]+\.)?(\w*(?:Error|Exception)\b.*)$")
"""The last line of a traceback, `ValueError: ...`, after vLLM's `(EngineCore_DP0 pid=42) `."""


def root_cause(log_path: Path, error: BaseException) -> str | None:
    """Where `error` says its cause is "above" (vLLM's engine core failed to start), the error
    a child process printed into the job's log before it: the last one, in one line."""
    if ROOT_CAUSE_ABOVE not in str(error).lower():
        return None
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    before = text.rsplit(" job failed\n", 1)[0]
    for line in reversed(before.splitlines()):
        found = _ERROR_LINE.match(line.strip())
        if found and ROOT_CAUSE_ABOVE not in found.group(1).lower():
            return " ".join(found.group(1).split())
    return None


def one_line(error: BaseException) -> str:
    """An error as a single line: its type and its message, whitespace runs made one space."""
    return " ".join(f"{type(error).__name__}: {error}".split())


def failed_job_report(jobs: Iterable[Any]) -> list[str]:
    """One line per failed job: which it is, its log, and the log's last line.

    The workflow's profile keeps Snakemake's own job blocks off the console (`quiet: [rules]`:
    thousands of paths per job at the benchmark's size), its error blocks with them; this says
    what failed and where to look, for local and cluster jobs alike."""
    lines = []
    for job in sorted(jobs, key=str):
        wildcards = ", ".join(f"{key}={value}" for key, value in job.wildcards_dict.items())
        line = f"bouquet-eval: job {job.rule.name}{f' ({wildcards})' if wildcards else ''} failed"
        # Absolute: the run's working directory (-d) need not be where the command was typed.
        logs = [Path(path).absolute() for path in job.log]
        if logs:
            line += f"; its log: {', '.join(map(str, logs))}"
            last = _last_line(logs[0])
            if last:
                line += f"; it ends: {last}"
        lines.append(line)
    return lines


def _last_line(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None
