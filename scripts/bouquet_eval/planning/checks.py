"""Checks made while planning, before any job starts, and how a configuration error ends a run.

A translator or prompt function of one's own is imported and its keyword arguments are bound to
its signature, without loading any model: a typo then costs a second at planning, not a failed
job per shard after a queue wait. An API key's variable is looked up in the environment.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from bouquet_eval.core.config import ConfigError, import_object
from bouquet_eval.planning.plan import ModelPlan
from bouquet_eval.translators import BACKENDS

# What the workflow hands a prompt function (prompt.PromptFn).
PROMPT_ARGUMENTS = ("src_lang", "tgt_lang", "src_text")
KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def stop_planning(error: ConfigError, configfiles: Sequence[str | Path]) -> NoReturn:
    """End the run with one line, `bouquet-eval: <file>: <error>`: no traceback, and no wrapper
    of Snakemake's pointing at the workflow's own source, which is not what needs fixing."""
    print(error_line(error, configfiles), file=sys.stderr, flush=True)
    raise SystemExit(1)


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


def check_own_objects(models: Iterable[ModelPlan]) -> None:
    """Import each translator and prompt function of one's own (not a backend's) of the plan's
    models, in the configuration's order, and bind its arguments."""
    for index, model in enumerate(models):
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
        raise ConfigError(f"{spec_key} {named}: {error}", spec_key) from None
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
    translating = {job.params.model for job in jobs if job.rule.name.startswith("translate_")}
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
