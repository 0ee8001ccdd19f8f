"""Checks made while planning, before any job starts, and how a configuration error ends a run.

A translator or prompt function of one's own is imported and its keyword arguments are bound to
its signature, without loading any model: a typo then costs a second at planning, not a failed
job per shard after a queue wait. An API key's variable is looked up in the environment.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from bouquet_eval.core.config import ConfigError, import_object
from bouquet_eval.planning.plan import ModelPlan
from bouquet_eval.translators import BACKENDS

# What the workflow hands a prompt function (prompt.PromptFn).
PROMPT_ARGUMENTS = ("src_lang", "tgt_lang", "src_text")
KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
LOG_DRAIN_SECONDS = 5.0
"""The longest a run's last line waits for the log records before it to be written."""


def stop_planning(error: ConfigError, configfiles: Sequence[str | Path]) -> NoReturn:
    """End the run with one line, `bouquet-eval: <file>: <error>`: no traceback, and no wrapper
    of Snakemake's pointing at the workflow's own source, which is not what needs fixing. It
    is the last line: what Snakemake logged before it is written first."""
    written_log()
    print(error_line(error, configfiles), file=sys.stderr, flush=True)
    raise SystemExit(1)


def written_log() -> None:
    """Wait until Snakemake's log handlers have written every record logged so far. With a
    logger plugin (the workflow's console) they write from a thread of their own, which may
    otherwise print the run's job table after a line the main process prints."""
    from logging.handlers import QueueHandler

    from snakemake.logging import logger

    deadline = time.monotonic() + LOG_DRAIN_SECONDS
    for handler in logger.handlers:
        queue = getattr(handler, "queue", None) if isinstance(handler, QueueHandler) else None
        while getattr(queue, "unfinished_tasks", 0) and time.monotonic() < deadline:
            time.sleep(0.01)


def error_line(error: ConfigError, configfiles: Sequence[str | Path]) -> str:
    """`bouquet-eval: <file>: <error>`, the file that set the key at fault named if one did."""
    source = None if error.key is None else file_of_key(error.key, configfiles, error.key_is_set)
    return f"bouquet-eval: {f'{source}: ' if source else ''}{error}"


def key_parts(key: str) -> list[str | int]:
    """`models[1].translator_kwargs.x` -> ["models", 1, "translator_kwargs", "x"]."""
    parts: list[str | int] = []
    for dotted in key.split("."):
        name, *indices = dotted.replace("]", "").split("[")
        parts += [name] if name else []
        parts += [int(index) for index in indices]
    return parts


def file_of_key(key: str, configfiles: Sequence[str | Path], whole: bool = False) -> Path | None:
    """The configuration file that gave `key` its value: of the files that hold the longest
    part of its path (`whole`: all of it), the last one, as later files override earlier ones.
    None when no file holds even its first part (a default, or a --config item)."""
    parts = key_parts(key)
    best: tuple[int, Path | None] = (0, None)
    for path in map(Path, configfiles):
        try:
            node = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        depth = 0
        for part in parts:
            if not holds(node, part):
                break
            node = node[part]
            depth += 1
        if depth and depth >= best[0] and (depth == len(parts) or not whole):
            best = (depth, path)
    return best[1]


def holds(node: Any, part: str | int) -> bool:
    if isinstance(part, int):
        return isinstance(node, list) and part < len(node)
    return isinstance(node, Mapping) and part in node


def translating_models(jobs: Iterable[Any]) -> set[str]:
    """The models that Snakemake's jobs translate with (a translate job's `model` param)."""
    return {job.params.model for job in jobs if job.rule.name.startswith("translate_")}


def check_own_objects(models: Iterable[ModelPlan], translating: Container[str]) -> None:
    """Import each translator and prompt function of one's own (not a backend's) of the plan's
    models that translate (by name), in the configuration's order, and bind its arguments:
    those of the others are never called, and a folder of runs made elsewhere may not have
    them on its import path."""
    for index, model in enumerate(models):
        if model.name in translating:
            check_model_objects(index, model)


def warn_of_unusable_own_objects(models: Iterable[ModelPlan], configfiles: Sequence[str]) -> None:
    """In a dry run: the translators and prompt functions a real run would stop for."""
    for index, model in enumerate(models):
        try:
            check_model_objects(index, model)
        except ConfigError as error:
            line = error_line(error, configfiles).removeprefix("bouquet-eval: ")
            print(
                f"bouquet-eval: warning: {line}; a real run that translates with this model "
                "stops before any job starts",
                file=sys.stderr,
            )


def check_model_objects(index: int, model: ModelPlan) -> None:
    """Import the translator and prompt function of one's own of `models[index]`, and bind
    their arguments (ConfigError naming the key)."""
    where = f"models[{index}]"
    named = f"(model '{model.name}')"
    backend = BACKENDS.get(model.translator)
    if backend is None:
        check_call(
            model.translator,
            dict(model.arguments),
            f"{where}.translator",
            f"{where}.translator_kwargs",
            named,
        )
    if model.prompt_fn and model.prompt_fn != (backend.prompt_fn if backend else None):
        kwargs = model.prompt_kwargs
        if kwargs is None:
            check_call(
                model.prompt_fn, {}, f"{where}.prompt_fn", f"{where}.prompt_fn", named,
                positional=PROMPT_ARGUMENTS,
            )  # fmt: skip
        else:
            check_call(
                model.prompt_fn,
                kwargs,
                f"{where}.prompt_fn",
                f"{where}.prompt_kwargs",
                named,
            )


def check_call(
    spec: str,
    kwargs: Mapping[str, Any],
    spec_key: str,
    kwargs_key: str,
    named: str,
    positional: Sequence[str] = (),
) -> None:
    """Raise a ConfigError naming the key when `spec` cannot be imported or called this way."""
    try:
        target: Callable[..., Any] = import_object(spec)
    except (ImportError, ValueError) as error:
        where = ""
        if isinstance(error.__cause__, ModuleNotFoundError):
            where = " (the folder that holds it goes in python_path, or on PYTHONPATH)"
        raise ConfigError(f"{spec_key} {named}: {error}{where}", spec_key) from None
    if not callable(target):
        raise ConfigError(f"{spec_key} {named}: '{spec}' cannot be called", spec_key)
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # nothing to check against (some built-in callables)
        return
    parameters = signature.parameters.values()
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    by_keyword = [p.name for p in parameters if p.kind in KEYWORD_KINDS]
    unknown = [name for name in kwargs if name not in by_keyword]
    if unknown and not takes_any:
        raise ConfigError(
            f"{kwargs_key}.{unknown[0]} {named}: '{spec}' takes no argument '{unknown[0]}' "
            f"(its arguments: {', '.join(by_keyword) or 'none'})",
            f"{kwargs_key}.{unknown[0]}",
        )
    try:
        signature.bind(*positional, **kwargs)
    except TypeError as error:
        called = f"({', '.join(positional)})" if positional else "with these arguments"
        raise ConfigError(
            f"{kwargs_key} {named}: '{spec}' cannot be called {called}: {error}", kwargs_key
        ) from None


def unset_api_keys(
    models: Iterable[ModelPlan], environ: Mapping[str, str] = os.environ
) -> list[tuple[str, str, str]]:
    """(model name, key, variable) of each model of the plan, in the configuration's order,
    whose `api_key_env` names an unset or empty environment variable."""
    return [
        (model.name, f"models[{index}].{model.api_key_setting}", model.api_key_env)
        for index, model in enumerate(models)
        if model.api_key_env is not None and not environ.get(model.api_key_env)
    ]


def warn_of_unset_api_keys(models: Iterable[ModelPlan]) -> None:
    """In a dry run: what a real run would stop for."""
    for name, key, variable in unset_api_keys(models):
        print(
            f"bouquet-eval: warning: {key} (model '{name}'): the environment variable "
            f"{variable} is not set; a real run that translates with this model stops before "
            "any job starts",
            file=sys.stderr,
        )


def refuse_unset_api_keys(
    models: Iterable[ModelPlan], jobs: Iterable[Any], configfiles: Sequence[str | Path]
) -> None:
    """Stop a run before any job starts when a model that is to translate has no API key."""
    translating = translating_models(jobs)
    for name, key, variable in unset_api_keys(models):
        if name in translating:
            stop_planning(
                ConfigError(
                    f"{key} (model '{name}'): the environment variable {variable} is not set or "
                    "is empty; set it to the API key, or set api_key_env to null for a server "
                    "that needs no key. No job was started.",
                    key,
                ),
                configfiles,
            )


def environment_problem(
    environment: str, python: str | None, metrics: Sequence[str], modules: Sequence[str]
) -> ConfigError | None:
    """What keeps the score jobs of `metrics` from running in their software `environment`:
    its Python (`environments.<environment>`; None: Snakemake's own, that of a run that
    names none) missing, or lacking a module of `modules` that they import; None if nothing.
    """
    from bouquet_eval.core.home import interface

    key = f"environments.{environment}"
    named = f"{'metric' if len(metrics) == 1 else 'metrics'} {', '.join(metrics)}"
    if python is not None and not os.access(python, os.X_OK):
        return ConfigError(
            f"{key}: {python}, the Python of the environment of {named}, is not an executable file",
            key,
            key_is_set=True,
        )
    missing = missing_modules(python, modules)
    if not missing:
        return None
    lacks = f"has no module {', '.join(missing)}"
    if python is not None:
        return ConfigError(
            f"{key}: {python}, the Python of the environment of {named}, {lacks}", key, True
        )
    setting = (
        f"--environment {environment}=PYTHON"
        if interface() == "command"
        else f"environments: {{{environment}: PYTHON}}"
    )
    return ConfigError(
        f"{named} {'scores' if len(metrics) == 1 else 'score'} in the software environment "
        f"'{environment}' "
        f"(envs/{environment}.yaml), and this Python ({sys.executable}) {lacks}: give that "
        f"environment's Python with {setting} (docs/metrics.md#score-jobs), or run with "
        "--sdm conda",
        key,
    )


def missing_modules(python: str | None, modules: Sequence[str]) -> list[str]:
    """The modules of `modules` that `python` (None: this one) cannot find (none is imported)."""
    import importlib.util
    import subprocess

    if python is None:
        return [module for module in modules if not _installed(importlib.util.find_spec(module))]
    found = subprocess.run(
        [python, "-c", _MISSING_MODULES, *modules], capture_output=True, text=True, check=False
    )
    return found.stdout.split() if found.returncode == 0 else list(modules)


def _installed(spec: Any) -> bool:
    # A folder of that name on the import path (a checkpoint in ./comet) is a namespace
    # package, with no code: not the module.
    return spec is not None and spec.origin is not None


_MISSING_MODULES = (
    "import importlib.util, sys; "
    "print(*[m for m in sys.argv[1:] if getattr(importlib.util.find_spec(m), 'origin', None) "
    "is None])"
)
