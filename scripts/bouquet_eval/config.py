"""Workflow configuration: JSON-Schema validation with defaults, and path handling."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml


class ConfigError(ValueError):
    """A configuration value is missing, malformed or inconsistent."""


def _fill_defaults(validator_class: type) -> type:
    """Extend a validator so that `properties` also inserts each property's `default`.

    Defaults are inserted before the subschemas are validated, so nested objects whose
    default is `{}` get their own defaults filled in turn.
    """
    validate_properties = validator_class.VALIDATORS["properties"]

    def properties_with_defaults(
        validator: Any, properties: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties_with_defaults})


_Validator = _fill_defaults(jsonschema.Draft202012Validator)


def _location(path: Any) -> str:
    parts = []
    for part in path:
        parts.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return "".join(parts).lstrip(".") or "(top level)"


def _message(error: jsonschema.ValidationError) -> str:
    """The error, with the alternatives spelled out when none of several schemas matched."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        reasons = dict.fromkeys(sub.message for sub in error.context)
        return " and ".join(reasons)
    return error.message


def validate_config(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Validate `config` in place against the schema, filling defaults; return it.

    Raises ConfigError with one message naming the offending key.
    """
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    error = jsonschema.exceptions.best_match(_Validator(schema).iter_errors(config))
    if error is not None:
        raise ConfigError(
            f"invalid configuration at '{_location(error.absolute_path)}': {_message(error)}"
        )
    names = [model["name"] for model in config["models"]]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"invalid configuration at 'models': duplicate model names {duplicates}")
    compare = config["compare"]
    unknown = [
        name for name in [*compare["models"], compare["baseline"]] if name and name not in names
    ]
    if unknown:
        raise ConfigError(f"invalid configuration at 'compare': unknown model(s) {unknown}")
    if compare["models"] and compare["baseline"] and compare["baseline"] not in compare["models"]:
        raise ConfigError(
            "invalid configuration at 'compare': the baseline is not among its models"
        )
    return config


def expand_path(value: str | os.PathLike[str]) -> Path:
    """Expand `~` and environment variables; a relative path stays relative to the workdir."""
    expanded = os.path.expanduser(os.path.expandvars(os.fspath(value)))
    if "$" in expanded:
        raise ConfigError(f"path '{value}' refers to an environment variable that is not set")
    return Path(expanded)


def load_yaml(path: str | Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        loaded = yaml.safe_load(handle)
    return loaded if loaded is not None else {}
