"""What a published Snakemake workflow carries: licence, citation and changelog of the
package's version, the workflow catalog's usage file, and a config/README.md whose tables
render."""

from __future__ import annotations

import json
import tomllib

import jsonschema
import pytest
import yaml

from bouquet_eval.planning.schema import COMPLETE_SCHEMA, complete_schema_text

from .conftest import REPOSITORY

VERSION = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "version"
]


def test_licence_citation_and_changelog_name_the_version() -> None:
    licence = (REPOSITORY / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License")
    assert "\n## License\n\nMIT ([LICENSE](LICENSE))" in (REPOSITORY / "README.md").read_text(
        encoding="utf-8"
    )
    citation = yaml.safe_load((REPOSITORY / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["cff-version"] == "1.2.0" and citation["license"] == "MIT"
    assert str(citation["version"]) == VERSION and citation["title"] and citation["authors"]
    changelog = (REPOSITORY / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"\n## {VERSION}\n" in changelog


def test_the_catalog_usage_file_has_what_the_catalog_reads() -> None:
    settings = yaml.safe_load(
        (REPOSITORY / ".snakemake-workflow-catalog.yml").read_text(encoding="utf-8")
    )
    usage = settings["usage"]
    flags = usage["mandatory-flags"]
    assert flags["desc"] and flags["flags"].startswith("--configfile ")
    assert (REPOSITORY / flags["flags"].split()[1]).is_file()
    deployment = usage["software-stack-deployment"]
    assert set(deployment) <= {"conda", "apptainer", "apptainer+conda"} and deployment["conda"]
    # Every rule that runs code names a conda environment of the repository.
    rules = "".join(p.read_text() for p in (REPOSITORY / "workflow" / "rules").glob("*.smk"))
    assert rules.count("conda:") >= rules.count("script:")
    assert usage["report"] is True
    assert (REPOSITORY / "workflow" / "Snakefile").is_file()
    assert (REPOSITORY / "config" / "README.md").is_file()


def test_config_readme_tables_render_with_every_cell() -> None:
    """A `|` inside a cell splits it unless escaped: every row of a rendered table has the
    header's number of cells, as the catalog's Markdown rendering shows them."""
    # markdown-it-py (dev extra) is in the main environment; the vLLM and COMET environments,
    # whose runs select none of these tests, still collect this module.
    markdown_it = pytest.importorskip("markdown_it")
    tokens = (
        markdown_it.MarkdownIt("commonmark")
        .enable("table")
        .parse((REPOSITORY / "config" / "README.md").read_text(encoding="utf-8"))
    )
    tables, header, cells = 0, None, 0
    for token in tokens:
        if token.type == "table_open":
            tables, header = tables + 1, None
        elif token.type == "tr_open":
            cells = 0
        elif token.type in ("th_open", "td_open"):
            cells += 1
        elif token.type == "tr_close":
            header = header or cells
            assert cells == header, f"config/README.md, line {token.map}: {cells} cells"
    assert tables >= 3


def test_the_published_schema_is_the_complete_one() -> None:
    """workflow/schemas/config.complete.schema.json, which editors read, is the schema the
    workflow validates with (its registries filled in); `make schema` rewrites it."""
    schemas = REPOSITORY / "workflow" / "schemas"
    published = schemas / COMPLETE_SCHEMA
    assert published.read_text(encoding="utf-8") == complete_schema_text(
        schemas / "config.schema.yaml"
    ), "the published schema is out of date: run `make schema`"
    schema = json.loads(published.read_text(encoding="utf-8"))
    # On its own, with nothing of the workflow's code: what an editor does.
    validator = jsonschema.Draft202012Validator(schema)
    for name in ("config.yaml", "demo.yaml"):
        path = REPOSITORY / "config" / name
        text = path.read_text(encoding="utf-8")
        assert text.startswith(
            f"# yaml-language-server: $schema=../workflow/schemas/{published.name}\n"
        )
        assert not list(validator.iter_errors(yaml.safe_load(text))), name
    wrong = {"models": [{"name": "m", "translator": "vllm", "modle": "x"}]}
    assert list(validator.iter_errors(wrong))
    assert list(
        validator.iter_errors(
            {
                "models": [{"name": "m", "translator": "copy-source"}],
                "directions": {"list": ["eng-fra"]},
            }
        )
    )
