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
    """Log to the job's log file (and stderr); a failure's traceback goes to the log too."""
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
    except BaseException:
        logger.exception("job failed")
        raise
    finally:
        for handler in handlers:
            handler.flush()


def model_entry(config: dict[str, Any], name: str) -> dict[str, Any]:
    for model in config["models"]:
        if model["name"] == name:
            return model
    raise KeyError(f"no model named '{name}' in the configuration")
