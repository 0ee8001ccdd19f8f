"""Configuration values: the error that names a key, paths, YAML files, job names, objects."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A configuration value is missing, malformed or inconsistent.

    `key`: where in the configuration, as `models[1].translator_kwargs.temperature`, when one
    key is at fault; the file that set it is then named (see checks.stop_planning).
    `key_is_set`: the key holds the value at fault (rather than lacking one), so only a file
    that holds the whole key can have set it; none does when a --config item did.
    """

    def __init__(self, message: str, key: str | None = None, key_is_set: bool = False) -> None:
        super().__init__(message)
        self.key = key
        self.key_is_set = key_is_set


def job_name(model_name: str) -> str:
    """A model's name as it appears in job names (letters, digits and `_` only)."""
    return re.sub(r"[^A-Za-z0-9]", "_", model_name)


def expand_path(value: str | os.PathLike[str], extra: Mapping[str, str] | None = None) -> Path:
    """Expand `~` and environment variables (then those of `extra`, for names the environment
    lacks); a relative path stays relative to the workdir.

    `$BOUQUET_EVAL_HOME`, when neither the environment nor `extra` has it (a script of one's
    own), is the repository this package comes from (see `home.workflow_home`).
    """
    from bouquet_eval.core.home import HOME_VARIABLE, workflow_home

    home = workflow_home()
    variables = {**({HOME_VARIABLE: str(home)} if home else {}), **(extra or {})}
    expanded = os.path.expandvars(os.fspath(value))
    expanded = _VARIABLE.sub(lambda match: variables.get(match[1] or match[2], match[0]), expanded)
    expanded = os.path.expanduser(expanded)
    if "$" in expanded:
        raise ConfigError(f"path '{value}' refers to an environment variable that is not set")
    return Path(expanded)


_VARIABLE = re.compile(r"\$(?:(\w+)|\{(\w+)\})")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML file holds (an empty file holds none); ConfigError naming the file,
    and the line and column of a syntax error, when it holds no mapping."""
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}{where}: not valid YAML: {error.problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"{path}: holds a {type(loaded).__name__}, not the mapping of settings "
            "(`key: value` lines at its top level) a configuration is"
        )
    return loaded


def import_object(spec: str) -> Any:
    """Resolve "package.module:name" to the named attribute."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"'{spec}' is not of the form 'package.module:name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(f"cannot import module '{module_name}' of '{spec}': {error}") from error
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImportError(f"module '{module_name}' has no attribute '{attribute}'") from None
