"""Helpers for the thin scripts that Snakemake rules run."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Relative to the working directory, which all jobs of a run on one machine share.
GPU_LEASES = Path(".snakemake") / "bouquet-eval-gpu-leases"


@contextlib.contextmanager
def job_logging(log_path: str | Path) -> Iterator[logging.Logger]:
    """Log to the job's log file (and stderr).

    A failure is logged with its traceback, then in one line, the last of the log and of the
    job's stderr: what a user reads first. The process then exits with status 1, without
    Python printing the traceback a second time.
    """
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    handlers: list[logging.Handler] = [
        logging.FileHandler(log_path, mode="w", encoding="utf-8"),
        logging.StreamHandler(sys.stderr),
    ]
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    # HTTP clients log every request at INFO: thousands of lines that say nothing.
    for chatty in ("httpx", "httpx2", "httpcore", "httpcore2", "openai"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    logger = logging.getLogger("bouquet_eval")
    try:
        yield logger
    except (KeyboardInterrupt, SystemExit):
        logger.exception("job stopped")
        raise
    except BaseException as error:  # errors, and interruptions such as a stalled translator
        logger.exception("job failed")
        logger.error("job failed: %s", one_line(error))
        raise SystemExit(1) from error
    finally:
        for handler in handlers:
            handler.flush()


def one_line(error: BaseException) -> str:
    """An error as a single line: its type and its message, whitespace runs made one space."""
    return " ".join(f"{type(error).__name__}: {error}".split())


def model_entry(config: dict[str, Any], name: str) -> dict[str, Any]:
    for model in config["models"]:
        if model["name"] == name:
            return model
    raise KeyError(f"no model named '{name}' in the configuration")
