"""Snakemake's logger plugin `bouquet`: the workflow's console (bouquet_eval.command.console)."""

from bouquet_eval.command.console import ConsoleHandler as LogHandler

__all__ = ["LogHandler"]
