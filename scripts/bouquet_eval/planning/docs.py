"""The documentation's tables of metrics and settings, generated from the records.

Every table that lists the built-in metrics or the translators' settings is written from the
metric records (`metrics.records`) and the translator registry (`translators.backends`), between
`<!-- generated: NAME -->` and `<!-- end of generated table -->` in the pages of
`GENERATED_PAGES`; `make docs` rewrites them and the published configuration schema (`main`),
and tests/test_publishing.py fails, naming that command, when a page is out of date. So adding a
record and running `make docs` updates every table that lists metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bouquet_eval.metrics.records import COMPOSITES, RECORDS, CompositeRecord, MetricRecord
from bouquet_eval.planning.schema import COMPLETE_SCHEMA, write_complete_schema
from bouquet_eval.translators.backends import BACKENDS, Setting

GENERATED_PAGES = (
    "config/README.md",
    "docs/metrics.md",
    "docs/metrics-comet.md",
    "docs/command-line.md",
)
"""The pages that hold generated tables, relative to the repository."""
DOCS_COMMAND = "make docs"
_BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>[\w()]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- end of generated table -->)",
    re.S,
)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [_row(header), "|" + "---|" * len(header), *(_row(cells) for cells in rows)]
    return "\n".join(lines) + "\n"


def _reading(column: str, record: MetricRecord) -> str:
    """How a column reads: a label, or which way is better (and its range)."""
    if column in record.label_columns:
        return "label"
    if column in record.targets:
        how = f"closest to {record.targets[column]:g} is best"
    else:
        how = "lower is better" if column in record.lower_is_better else "higher is better"
    low_high = record.ranges.get(column)
    return how + (f", {low_high[0]:g}..{low_high[1]:g}" if low_high is not None else "")


def _columns(record: MetricRecord) -> str:
    return "; ".join(f"`{column}` ({_reading(column, record)})" for column in record.columns)


def _composite_reading(composite: CompositeRecord) -> str:
    if composite.target is not None:
        how = f"closest to {composite.target:g} is best"
    else:
        how = f"{'lower' if composite.lower_is_better else 'higher'} is better"
    span = f", {composite.range[0]:g}..{composite.range[1]:g}" if composite.range else ""
    return f"`{composite.column}` ({how}{span})"


def _with_licence(record: MetricRecord) -> str:
    return record.summary + (f" (model licence: {record.licence})" if record.licence else "")


def metrics_table() -> str:
    """docs/metrics.md's table of the built-in metrics and composites."""

    def job(record: MetricRecord) -> str:
        default = {record.device_setting: "auto"} if record.device_setting else {}
        on_cpu = {record.device_setting: "cpu"} if record.device_setting else {}
        where = f"`{record.environment}`, {record.job_cpus(default)} CPU"
        if record.gpus(default):
            where += (
                f" + {record.gpus(default)} GPU ({record.job_cpus(on_cpu)} CPUs with "
                f"`{record.name}.{record.device_setting}: cpu`)"
            )
        return where

    def reads(record: MetricRecord) -> str:
        if record.reference_free:
            return "source or translation only"
        if record.qe_setting:
            return f"reference (none with `{record.name}.{record.qe_setting}: true`)"
        return "reference"

    rows = []
    for record in RECORDS.values():
        trained = (
            f"{len(record.training_languages)} languages"
            if record.training_languages is not None
            else record.coverage or "-"
        )
        rows.append(
            [
                f"`{record.name}`",
                _with_licence(record),
                _columns(record),
                reads(record),
                job(record),
                ", ".join(f"`{k}` {v:g}" for k, v in record.tolerances.items()),
                trained,
                ", ".join(f"`{field}`" for field in record.signature_fields),
            ]
        )
    for composite in COMPOSITES.values():
        rows.append(
            [
                f"`{composite.column}`",
                composite.summary + f" (with {' and '.join(composite.requires)})",
                _composite_reading(composite),
                "as its metrics do",
                "computed where the scores are gathered",
                f"`{composite.column}` {composite.tolerance:g}" if composite.tolerance else "",
                "-",
                "-",
            ]
        )
    header = [
        "metric",
        "what it measures",
        "columns",
        "reads",
        "score jobs (environment, CPUs, GPUs)",
        "`verify` tolerance",
        "trained on",
        "signature fields",
    ]
    return _table(header, rows)


def _default(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _description(schema: Mapping[str, Any], where: str) -> str:
    if not schema.get("description"):
        raise ValueError(f"{where} has no description: give its schema one")
    return str(schema["description"])


def metric_settings_table() -> str:
    """config/README.md's table of the built-in metrics `metrics` lists and their settings."""
    rows = []
    for record in RECORDS.values():
        settings = record.settings or {}
        rows.append(
            [
                f"`{record.name}`",
                "",
                "",
                f"{_with_licence(record)}: {_columns(record)}."
                + ("" if settings else " No settings."),
            ]
        )
        for key, schema in settings.items():
            where = f"metric record {record.name}, setting {key}"
            rows.append(
                [
                    "",
                    f"`{record.name}.{key}`",
                    _default(schema["default"]),
                    _description(schema, where),
                ]
            )
    for composite in COMPOSITES.values():
        rows.append(
            [
                f"`{composite.column}`",
                "",
                "",
                f"Added with {' and '.join(f'`{name}`' for name in composite.requires)}: "
                f"{composite.summary}; {_composite_reading(composite)}.",
            ]
        )
    return _table(["metric", "setting", "default", "meaning"], rows)


def _translator_groups() -> list[tuple[list[str], dict[str, Setting]]]:
    """Translators in the registry's order, grouped where each shares the same settings
    (the same objects) as the first of its group: (names, the settings they share)."""
    groups: list[tuple[list[str], dict[str, Setting]]] = []
    for name, backend in BACKENDS.items():
        if not backend.settings:
            continue
        if groups:
            _, shared = groups[-1]
            if all(backend.settings.get(key) is setting for key, setting in shared.items()):
                groups[-1][0].append(name)
                continue
        groups.append(([name], dict(backend.settings)))
    return groups


def translator_settings_table() -> str:
    """config/README.md's table of every built-in translator's settings (*speed*: settings
    that change how fast translations come, not what they are)."""
    rows = []
    for names, shared in _translator_groups():
        own = [(names, key, setting) for key, setting in shared.items()]
        for name in names:
            own += [
                ([name], key, setting)
                for key, setting in BACKENDS[name].settings.items()
                if key not in shared
            ]
        for translators, key, setting in own:
            meaning = _description(setting.schema, f"translator {translators[0]}, setting {key}")
            rows.append(
                [
                    ", ".join(f"`{name}`" for name in translators),
                    f"`{key}`",
                    "required" if setting.required else _default(setting.default),
                    ("*speed*. " if setting.operational else "") + meaning,
                ]
            )
    return _table(["translator", "setting", "default", "meaning"], rows)


def comet_family_table() -> str:
    """docs/metrics-comet.md's table of the metrics that run in COMET's environment."""
    rows = []
    for record in RECORDS.values():
        if record.environment != "comet":
            continue
        model = (record.settings or {})["model"]["default"]
        reads = "no (source and translation)" if record.reference_free else "yes"
        columns = ", ".join(f"`{column}`" for column in record.columns)
        rows.append([f"`{record.name}`", columns, f"`{model}`", reads, record.licence or "-"])
    header = ["metric", "column(s)", "default model", "needs a reference", "model licence"]
    return _table(header, rows)


def metric_flags_table() -> str:
    """The `bouquet-eval` flags of every built-in metric's models, device and reference-free
    switch (`MetricRecord.flags`), for config/README.md and docs/command-line.md."""
    rows = [
        [f"`{flag}`", _default((record.settings or {})[setting]["default"]),
         f"`{name}.{setting}`"]
        for name, record in RECORDS.items()
        for flag, setting in record.flags()
    ]  # fmt: skip
    return _table(["flag", "default", "configuration key"], rows)


TABLES: Mapping[str, Callable[[], str]] = {
    "metrics_table()": metrics_table,
    "metric_settings_table()": metric_settings_table,
    "translator_settings_table()": translator_settings_table,
    "comet_family_table()": comet_family_table,
    "metric_flags_table()": metric_flags_table,
}
"""The generated tables, by the name their page's marker gives."""


def regenerated(text: str, where: str) -> str:
    """`text` with every generated table written anew."""

    def table(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in TABLES:
            raise ValueError(f"{where}: unknown generated table {name}")
        return match["open"] + TABLES[name]() + match["close"]

    return _BLOCK.sub(table, text)


def stale_pages(repository: Path) -> list[str]:
    """The pages of GENERATED_PAGES whose generated tables differ from the records."""
    stale = []
    for page in GENERATED_PAGES:
        text = (repository / page).read_text(encoding="utf-8")
        if regenerated(text, page) != text:
            stale.append(page)
    return stale


def write_docs(repository: Path) -> list[str]:
    """Rewrite the generated tables and the published schema; what changed."""
    changed = []
    for page in GENERATED_PAGES:
        path = repository / page
        text = path.read_text(encoding="utf-8")
        new = regenerated(text, page)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    schema = repository / "workflow" / "schemas" / "config.schema.yaml"
    published = schema.with_name(COMPLETE_SCHEMA)
    before = published.read_text(encoding="utf-8") if published.is_file() else None
    write_complete_schema(schema)
    if published.read_text(encoding="utf-8") != before:
        changed.append(str(published.relative_to(repository)))
    return changed


def main() -> None:
    """`make docs`: the generated tables and the complete schema of this checkout."""
    from bouquet_eval.core.home import workflow_home

    repository = workflow_home()
    if repository is None:
        raise SystemExit("bouquet-eval: no checkout of the workflow to write the docs into")
    changed = write_docs(repository)
    print("rewrote " + ", ".join(changed) if changed else "the generated docs are up to date")
