"""docs/architecture.md stays true to the package: every module it names exists, and its table
lists every stage package."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
PAGE = REPOSITORY / "docs" / "architecture.md"
PACKAGE = REPOSITORY / "scripts" / "bouquet_eval"


def named_modules(text: str) -> set[str]:
    """Dotted names `bouquet_eval.x.y[.function]` the page mentions, attributes left out."""
    return set(re.findall(r"\bbouquet_eval(?:\.[a-z_][a-z0-9_]*)+", text))


def module_of(name: str) -> str | None:
    """The longest prefix of `name` that is a module of the package (None if none is)."""
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        candidate = ".".join(parts[:end])
        try:
            if importlib.util.find_spec(candidate) is not None:
                return candidate
        except ModuleNotFoundError:  # its parent is a module, not a package
            continue
    return None


def test_every_module_the_page_names_exists() -> None:
    names = named_modules(PAGE.read_text(encoding="utf-8"))
    assert len(names) > 10
    missing = sorted(name for name in names if module_of(name) is None)
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
    # An attribute after the module (`load_plan`) exists in it too.
    for name in names:
        module = module_of(name)
        assert module is not None
        rest = name.removeprefix(module).lstrip(".")
        if rest:
            assert hasattr(importlib.import_module(module), rest.split(".")[0]), name


def test_the_table_lists_every_package() -> None:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## The package", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    listed = set(re.findall(r"`bouquet_eval\.([a-z_]+)`", "".join(rows)))
    packages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert listed == packages


def test_jobs_read_the_configuration_through_their_slice_alone() -> None:
    """One channel (docs/design.md, "How a setting reaches a job"): no rule script reads the
    configuration itself, no rule hands a job a setting but in its slice, and no parameter is
    there only to rerun a job."""
    for script in (REPOSITORY / "scripts" / "rules").glob("*.py"):
        text = script.read_text(encoding="utf-8")
        for reading in ("snakemake.config", "plan.config", ".config["):
            assert reading not in text, f"{script.name} reads {reading}"
    for rules in (REPOSITORY / "workflow" / "rules").glob("*.smk"):
        text = rules.read_text(encoding="utf-8")
        assert "rerun_when" not in text, rules.name
        for params in re.findall(r"\n\s+params:\n(.*?)\n\s+script:", text, re.DOTALL):
            assert "config[" not in params, f"{rules.name}: {params}"
