"""One channel from the configuration into every job: what each setting can change, and the
slice of the configuration each rule's jobs receive.

Every leaf setting of the configuration schema declares what it can change (`changes`, a
keyword of the schema beside its type and default; a model entry's translator settings declare
it through their registry, a metric's settings through its record):

- outputs, by the name of what they are (`OUTPUTS`): the jobs of the stages that make them read
  the setting, and receive it in their slice;
- the shape of the run (`SHAPES`): which sentences are evaluated, or which jobs there are and
  how they are grouped and placed; such a setting reaches no slice, the jobs it adds, removes
  or regroups are Snakemake's to plan;
- nothing (`changes: []`): a setting that changes only how a job runs (speed, memory, where).
  Jobs that use one receive it as a typed field of the plan, which Snakemake does not record.

A rule's jobs receive their slice as a parameter of builtin values, which Snakemake records
with each output and compares at the next run: a changed setting reruns exactly the jobs that
read it, and Snakemake reruns what follows from their outputs. The settings digests that make
outputs current (bouquet_eval.core.freshness) are computed from the same slices.

A setting that a release adds declares the release (`added`): while it holds its default, which
must reproduce the earlier behaviour, it is left out of every slice and so of every digest, and
the outputs finished before the upgrade stay current.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OUTPUTS: Mapping[str, tuple[str, ...]] = {
    "translations": ("translate", "aggregate"),
    # Every job that loads the metrics reads their settings: those that score, and those that
    # make aggregates, figures, comparisons, exports and verifications of the scores.
    "scores": (
        "score",
        "aggregate",
        "heatmaps",
        "leaderboard",
        "compare",
        "mtme",
        "metaeval",
        "verify",
        "prefetch",
    ),
    "aggregates": ("aggregate",),
    "heatmaps": ("heatmaps",),
    "leaderboard": ("leaderboard",),
    "comparison": ("compare",),
    "mtme": ("mtme",),
    # The judged systems' translations and sentences, and what is computed from them.
    "judged": ("metaeval_inputs", "metaeval"),
    "metaeval": ("metaeval",),
    "submission": ("submission",),
    "verification": ("verify",),
}
"""What a setting can change -> the stages whose jobs read it (the aggregate job records a
model's translation settings in its manifest)."""

SHAPES: Mapping[str, str] = {
    "sentences": "which directions and sentences are evaluated",
    "jobs": "which jobs there are, how they are grouped and where their outputs go",
    # Snakemake reruns the jobs whose software environment changed ("software-env"); they find
    # their outputs current, unless a metric's signature (its versions) changed.
    "environment": "the software environment of the jobs of the section it is in",
}
"""What a setting can change of the run's shape: it reaches no slice."""

STAGES = tuple(dict.fromkeys(stage for stages in OUTPUTS.values() for stage in stages))

MODEL_KEYED = ("prices",)
"""Top-level settings keyed by a model's name: part of that model's slices only."""

LEADERBOARD_READS = ("translations", "scores", "aggregates", "heatmaps", "leaderboard", "sentences")
"""What the models of one leaderboard share: the sentences, and the run-wide settings that the
leaderboard's jobs and those it takes its inputs from read (`shared_settings`)."""


@dataclass(frozen=True)
class Declared:
    """A leaf setting of the schema and what it can change.

    `path`: keys from the top of the configuration; `*` stands for any key of a mapping,
    `<pattern>` for keys that match a pattern, `[]` for any model entry and `[<translator>]`
    for the entries of one translator.
    """

    path: tuple[str, ...]
    changes: tuple[str, ...] | None
    """None: the schema declares nothing (a new setting without its declaration)."""
    schema: Mapping[str, Any]

    @property
    def name(self) -> str:
        shown = ""
        for part in self.path:
            shown += part if part.startswith("[") or not shown else f".{part}"
        return shown

    @property
    def added(self) -> str | None:
        """The release that added it, for a setting added with a default that reproduces the
        earlier behaviour."""
        return self.schema.get("added")

    @property
    def has_default(self) -> bool:
        return "default" in self.schema

    @property
    def default(self) -> Any:
        return self.schema.get("default")

    @property
    def metric(self) -> str | None:
        """The metric whose configuration section holds it."""
        from bouquet_eval.metrics.records import RECORDS

        return self.path[0] if self.path[0] in RECORDS else None

    @property
    def shapes(self) -> tuple[str, ...]:
        return tuple(kind for kind in self.changes or () if kind in SHAPES)

    def read_by(self, stage: str) -> bool:
        return any(stage in OUTPUTS.get(kind, ()) for kind in self.changes or ())

    def leaves_out(self, value: Any) -> bool:
        """Whether `value` stays out of slices: an added setting at its default."""
        return bool(self.added) and self.has_default and value == self.default


def declared_settings(schema: Mapping[str, Any]) -> tuple[Declared, ...]:
    """Every leaf setting of the complete schema (`schema.load_schema`), in its order."""
    definitions = schema.get("$defs", {})

    def resolved(node: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in node:
            target = definitions[node["$ref"].rsplit("/", 1)[-1]]
            own = {key: value for key, value in node.items() if key != "$ref"}
            merged = {**target, **own}
            if "properties" in own and "properties" in target:
                # A reference's own properties refine the target's (their defaults).
                merged["properties"] = {
                    **target["properties"],
                    **{
                        key: {**target["properties"].get(key, {}), **value}
                        for key, value in own["properties"].items()
                    },
                }
            node = merged
        return node

    def walk(node: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[Declared]:
        node = resolved(node)
        if "changes" in node:
            yield Declared(path, tuple(node["changes"]), node)
            return
        inner = False
        for key, subschema in node.get("properties", {}).items():
            if subschema:  # an empty one is typed in a branch of `allOf` (translator settings)
                inner = True
                yield from walk(subschema, (*path, key))
        for pattern, subschema in node.get("patternProperties", {}).items():
            inner = True
            yield from walk(subschema, (*path, f"<{pattern}>"))
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            inner = True
            yield from walk(extra, (*path, "*"))
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, dict):
            entry = resolved(items)
            if "properties" in entry:
                inner = True
                yield from walk(entry, (*path, "[]"))
        for branch in node.get("allOf", ()):
            translator = branch.get("if", {}).get("properties", {}).get("translator", {})
            if "const" in translator:
                for key, subschema in branch.get("then", {}).get("properties", {}).items():
                    inner = True
                    yield from walk(subschema, (*path[:-1], f"[{translator['const']}]", key))
        if not inner:
            yield Declared(path, None, node)

    return tuple(walk(schema, ()))


def occurrences(config: Any, path: Sequence[str]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(where, value) of every value of the configuration at a declared path; `where` holds
    the keys and model indices that lead to it."""
    if not path:
        yield (), config
        return
    head, rest = path[0], path[1:]
    if head.startswith("["):
        translator = head[1:-1]
        for index, entry in enumerate(config if isinstance(config, list) else ()):
            if isinstance(entry, dict) and translator in ("", entry.get("translator")):
                for where, value in occurrences(entry, rest):
                    yield (index, *where), value
    elif head == "*" or head.startswith("<"):
        pattern = None if head == "*" else re.compile(head[1:-1])
        for key, item in (config if isinstance(config, dict) else {}).items():
            if pattern is None or pattern.search(key):
                for where, value in occurrences(item, rest):
                    yield (key, *where), value
    elif isinstance(config, dict) and head in config:
        for where, value in occurrences(config[head], rest):
            yield (head, *where), value


def config_key(where: Sequence[Any]) -> str:
    """`where` as configuration keys are named in messages: `models[1].temperature`."""
    shown = ""
    for part in where:
        shown += f"[{part}]" if isinstance(part, int) else (f".{part}" if shown else str(part))
    return shown


def model_of(where: Sequence[Any], config: Mapping[str, Any]) -> str | None:
    """The model a value belongs to: its entry's, or the key of a model-keyed setting."""
    if where[0] == "models" and len(where) > 1:
        return str(config["models"][where[1]]["name"])
    if where[0] in MODEL_KEYED and len(where) > 1:
        return str(where[1])
    return None


def slice_of(
    config: Mapping[str, Any],
    settings: Sequence[Declared],
    stage: str,
    model: str | None = None,
    metrics: Collection[str] | None = None,
) -> dict[str, Any]:
    """The settings of the validated `config` that the jobs of `stage` read, shaped as the
    configuration is: of the `model` where one is given (and of every model otherwise), and
    of the `metrics` where given (a family's score jobs; every metric of `metrics` otherwise).
    Sorted, so that Snakemake records the same values in the same order at every run."""
    listed = list(config.get("metrics") or [])
    scope = listed if metrics is None else [name for name in listed if name in metrics]
    found: dict[str, Any] = {}
    entries: dict[int, dict[str, Any]] = {}
    for setting in settings:
        if not setting.read_by(stage):
            continue
        if setting.metric is not None and setting.metric not in scope:
            continue
        for where, value in occurrences(config, setting.path):
            owner = model_of(where, config)
            if model is not None and owner is not None and owner != model:
                continue
            if setting.leaves_out(value):
                continue
            if setting.path == ("metrics",):
                value = scope
            if where[0] == "models":
                target = entries.setdefault(where[1], {"name": owner})
                keys = where[2:]
            else:
                target, keys = found, where
            for key in keys[:-1]:
                target = target.setdefault(key, {})
            target[keys[-1]] = copy.deepcopy(value)
    if entries:
        found["models"] = [entries[index] for index in sorted(entries)]
    return _sorted(found)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def shared_settings(
    config: Mapping[str, Any], settings: Sequence[Declared]
) -> dict[str, tuple[Declared, Any]]:
    """What the models of one leaderboard share, by configuration key: the run-wide settings
    (not a model's own) that change the sentences or what the leaderboard's jobs, and those it
    takes its inputs from, read (`LEADERBOARD_READS`)."""
    shared: dict[str, tuple[Declared, Any]] = {}
    for setting in settings:
        if setting.path[0] in ("models", *MODEL_KEYED):
            continue
        if not set(setting.changes or ()) & set(LEADERBOARD_READS):
            continue
        if setting.metric is not None and setting.metric not in config.get("metrics", ()):
            continue
        for where, value in occurrences(config, setting.path):
            if not setting.leaves_out(value):
                shared[config_key(where)] = (setting, value)
    return shared


def undeclared(settings: Sequence[Declared]) -> list[str]:
    """The settings whose declaration is missing or names what no setting can change."""
    known = {*OUTPUTS, *SHAPES}
    return [
        setting.name
        for setting in settings
        if setting.changes is None or not set(setting.changes) <= known
    ]


@dataclass(frozen=True)
class Unrecorded:
    """A value a job uses that changes none of its outputs (a setting declared `changes: []`),
    handed to it as an object of its own type, which Snakemake neither records nor compares:
    changing it reruns nothing."""

    value: Any

    def __str__(self) -> str:
        return str(self.value)
