"""Snakemake's logger plugin `bouquet`: the workflow's console (bouquet_eval.command.console).

Snakemake imports every installed logger plugin when it starts, before it reads a Snakefile,
and builds the handlers the profile names before it parses the workflow. This module imports
nothing of the workflow's package then: a run imports the package of the checkout whose
Snakefile runs, which its `sources.smk` puts first on the import path, whatever copy the
environment has installed. The console is loaded from that package once the workflow has
imported it, at the first record after; records that come before are held and handed to it
then.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from snakemake_interface_logger_plugins.base import LogHandlerBase

__all__ = ["LogHandler"]

PACKAGE = "bouquet_eval"


class LogHandler(LogHandlerBase):
    """Hands every record to the workflow's console, loaded from the package the run imports."""

    writes_to_stream = True
    writes_to_file = False
    # The console filters and formats for itself (bouquet_eval.command.console).
    has_filter = True
    has_formatter = True
    needs_rulegraph = False

    def __post_init__(self) -> None:
        self.console: Any = None
        self.held: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.console is None and PACKAGE not in sys.modules:
            self.held.append(record)
            return
        self.load().emit(record)

    def load(self) -> Any:
        if self.console is None:
            from bouquet_eval.command.console import ConsoleHandler

            self.console = ConsoleHandler(self.common_settings, self.settings)
            for record in self.held:
                self.console.emit(record)
            self.held = []
        return self.console

    def close(self) -> None:
        if self.console is not None or self.held:
            self.load().close()
        super().close()
