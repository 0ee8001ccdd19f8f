"""The configuration schema: validation with defaults, completed from the registries it names."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from bouquet_eval.core.config import ConfigError, job_name
from bouquet_eval.core.io import unpaired_surrogate


def _fill_defaults(validator_class: type[Any]) -> type[Any]:
    """Extend a validator so that `properties` also inserts each property's `default`, and
    gives a property whose schema allows numbers but not integers a float where the
    configuration wrote an integer: `temperature: 0` is the default `0.0`, not a new setting.

    Defaults are inserted before the subschemas are validated, so nested objects whose
    default is `{}` get their own defaults filled in turn.

    A string where the property takes no string but a number, a boolean or null is read as
    YAML: Snakemake's `--config key={nested: 900}` gives every nested value as a string.
    """
    validate_properties = validator_class.VALIDATORS["properties"]

    def properties_with_defaults(
        validator: Any, properties: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[jsonschema.ValidationError]:
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
                if isinstance(instance.get(name), str):
                    instance[name] = _scalar_of_text(instance[name], subschema)
                if _is_whole_number(instance.get(name)) and _takes_floats(subschema):
                    instance[name] = float(instance[name])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": properties_with_defaults})


_KINDS = {bool: "boolean", int: "integer", float: "number", type(None): "null"}


def _scalar_of_text(text: str, schema: Mapping[str, Any]) -> Any:
    """`text` as the number, boolean or null that `schema` takes instead of a string; `text`
    itself when the schema takes strings, or when the text is none of those."""
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    if not kinds or "string" in kinds:
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    kind = _KINDS.get(type(value))
    accepted = kind in kinds or (kind == "integer" and "number" in kinds)
    return value if accepted else text


def _is_whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _takes_floats(schema: Mapping[str, Any]) -> bool:
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    return "number" in kinds and "integer" not in kinds


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


def load_schema(schema_path: str | Path) -> dict[str, Any]:
    """The configuration schema: the file, completed with what other modules define.

    A model entry's schema comes from the translator registry, the built-in metrics' names and
    their settings sections (placed after `metrics`) from the metric records, and the
    language-code patterns from the module that parses codes, so that none can drift from the
    code that uses them.
    """
    from bouquet_eval.core.languages import DIRECTION_PATTERN, LANGUAGE_PATTERN
    from bouquet_eval.metrics.records import RECORDS
    from bouquet_eval.translators.backends import model_entry_schema

    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    written = schema["properties"]
    written["metrics"]["items"]["anyOf"][0]["enum"] = list(RECORDS)
    sections = {
        name: record.settings_schema()
        for name, record in RECORDS.items()
        if record.settings is not None
    }
    properties: dict[str, Any] = {}
    for key, value in written.items():
        if key in sections:
            raise ValueError(f"{schema_path}: the section '{key}' is its metric record's")
        properties[key] = value
        if key == "metrics":
            properties.update(sections)
    schema["properties"] = properties
    definitions = schema["$defs"]
    definitions["model"] = model_entry_schema()
    definitions["language"]["pattern"] = f"^{LANGUAGE_PATTERN}$"
    definitions["direction"]["pattern"] = f"^{DIRECTION_PATTERN}$"
    return schema


COMPLETE_SCHEMA = "config.complete.schema.json"
"""The complete schema, published beside the file it completes for editors and other tools
(`# yaml-language-server: $schema=...`); `make docs` writes it (`planning.docs`)."""


def complete_schema_text(schema_path: str | Path) -> str:
    """The complete schema (`load_schema`) as the published JSON file holds it."""
    return json.dumps(load_schema(schema_path), indent=2, ensure_ascii=False) + "\n"


def write_complete_schema(schema_path: Path) -> Path:
    published = schema_path.with_name(COMPLETE_SCHEMA)
    published.write_text(complete_schema_text(schema_path), encoding="utf-8")
    return published


def plain_config(config: dict[str, Any]) -> dict[str, Any]:
    """Make `config` hold only dicts, lists and scalars, in place, and return it.

    Snakemake hands over what its loaders give: a JSON configuration file (or a .yaml file
    holding JSON) gives OrderedDicts, a module's `config=` whatever the host built. Done once
    where the plan reads the configuration, so that nothing downstream (YAML dumps among them)
    depends on the mapping type it is given.
    """
    for key, value in list(config.items()):
        config[key] = _plain(value)
    return config


def _plain(value: Any) -> Any:
    # Plain dicts and lists are kept (their contents made plain in place), so that a caller
    # holding one of them still holds what the configuration holds.
    if type(value) is dict:
        for key, item in list(value.items()):
            value[key] = _plain(item)
        return value
    if type(value) is list:
        value[:] = [_plain(item) for item in value]
        return value
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _surrogate_at(value: Any, path: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], str] | None:
    """Where in `value` a string (or a key) holds an unpaired surrogate, and which."""
    if isinstance(value, str):
        found = unpaired_surrogate(value)
        return None if found is None else (path, found)
    items: Any = ()
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        found = unpaired_surrogate(key) if isinstance(key, str) else None
        at = (*path, key)
        if found is not None:
            return at, found
        inner = _surrogate_at(item, at)
        if inner is not None:
            return inner
    return None


def validate_config(
    config: dict[str, Any], schema: str | Path | Mapping[str, Any]
) -> dict[str, Any]:
    """Validate `config` in place against the schema (its file, or the complete schema as
    `load_schema` gives it), filling defaults; return it.

    Raises ConfigError with one message naming the offending key.
    """
    surrogate = _surrogate_at(config)
    if surrogate is not None:
        key = _location(surrogate[0])
        raise ConfigError(
            f"invalid configuration at '{key}': holds an unpaired surrogate "
            f"(U+{ord(surrogate[1]):04X}, an escape of JSON or YAML), which is not text",
            key,
        )
    complete = schema if isinstance(schema, Mapping) else load_schema(schema)
    error = jsonschema.exceptions.best_match(_Validator(complete).iter_errors(config))
    if error is not None:
        key = _location(error.absolute_path)
        raise ConfigError(f"invalid configuration at '{key}': {_message(error)}", key)
    # None where received submissions are all a maintainer's `verify` checks.
    names = [model["name"] for model in config.setdefault("models", [])]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"invalid configuration at 'models': duplicate model names {duplicates}")
    by_job_name: dict[str, list[str]] = {}
    for name in names:
        by_job_name.setdefault(job_name(name), []).append(name)
    clashes = [group for group in by_job_name.values() if len(group) > 1]
    if clashes:
        raise ConfigError(
            f"invalid configuration at 'models': model names {clashes[0]} differ only in "
            f"characters other than letters and digits, so their jobs would share the name "
            f"'{job_name(clashes[0][0])}'; rename one"
        )
    unpriced = sorted(set(config.get("prices", {})) - set(names))
    if unpriced:
        raise ConfigError(f"invalid configuration at 'prices': unknown model(s) {unpriced}")
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
