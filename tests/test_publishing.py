"""What a published Snakemake workflow carries: licence, citation and changelog of the
package's version, the workflow catalog's usage file, and a config/README.md whose tables
render."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import MappingProxyType

import jsonschema
import pytest
import yaml

from bouquet_eval.metrics import records
from bouquet_eval.metrics.records import RECORDS, MetricRecord
from bouquet_eval.planning import docs
from bouquet_eval.planning.docs import DOCS_COMMAND, GENERATED_PAGES, stale_pages
from bouquet_eval.planning.schema import COMPLETE_SCHEMA, complete_schema_text

from .conftest import REPOSITORY
from .pip_site import installed_site

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


CFFCONVERT = (
    # cffconvert 2.0.0 (PyPI's latest) wants jsonschema<4, which the project's pins exclude:
    # it is installed apart, with its dependencies at these versions.
    "cffconvert==2.0.0",
    "jsonschema==3.2.0",
    "pyrsistent==0.20.0",
    "attrs==26.1.0",
    "six==1.17.0",
    "ruamel.yaml==0.19.1",
    "pykwalify==1.8.0",
    "python-dateutil==4.0.0",
    "docopt==0.6.2",
    "click==8.5.1",
    "requests==2.34.2",
    "urllib3==2.8.0",
    "idna==3.20",
    "certifi==2026.10.19.post1",
    "charset-normalizer==3.5.3",
)


@pytest.fixture(scope="session")
def cffconvert(request: pytest.FixtureRequest) -> Path:
    return installed_site(request, "cffconvert", CFFCONVERT)


def validated(site: Path, citation: Path) -> subprocess.CompletedProcess[str]:
    """`cffconvert --validate -i <citation>`, run from its own folder."""
    script = "import sys; from cffconvert.cli.cli import cli; sys.argv[0] = 'cffconvert'; cli()"
    return subprocess.run(
        [sys.executable, "-c", script, "--validate", "-i", str(citation)],
        env={"PYTHONPATH": str(site), "PATH": ""},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_citation_is_valid_and_cites_what_the_numbers_rest_on(
    cffconvert: Path, tmp_path: Path
) -> None:
    result = validated(cffconvert, REPOSITORY / "CITATION.cff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid according to schema version 1.2.0" in result.stdout
    citation = yaml.safe_load((REPOSITORY / "CITATION.cff").read_text(encoding="utf-8"))
    titles = [reference["title"] for reference in citation["references"]]
    for work in ("BOUQuET", "BLEU Scores", "MetricX-24", "GlotLID", "COMET"):
        assert any(title.startswith(work) or work in title for title in titles), work
    assert all(reference.get("repository-code") for reference in citation["references"])
    # The check can fail: a date that is not one.
    broken = tmp_path / "CITATION.cff"
    text = (REPOSITORY / "CITATION.cff").read_text(encoding="utf-8")
    broken.write_text(text.replace('date-released: "2026-11-22"', "date-released: soon"))
    assert validated(cffconvert, broken).returncode != 0


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
    workflow validates with (its registries filled in); `make docs` rewrites it."""
    schemas = REPOSITORY / "workflow" / "schemas"
    published = schemas / COMPLETE_SCHEMA
    assert published.read_text(encoding="utf-8") == complete_schema_text(
        schemas / "config.schema.yaml"
    ), "the published schema is out of date: run `make docs`"
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


def test_the_generated_tables_are_the_records() -> None:
    """Every table of metrics and settings in the docs is the records' (`make docs`)."""
    stale = stale_pages(REPOSITORY)
    assert not stale, f"{', '.join(stale)} out of date: run `{DOCS_COMMAND}`"


def test_a_new_metric_record_reaches_every_table_with_the_docs_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record added, `make docs` run (its function, on a copy of the pages): every table
    that lists the metrics, and the schema, name it, its setting and its target."""
    for page in [*GENERATED_PAGES, "workflow/schemas/config.schema.yaml"]:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPOSITORY / page, tmp_path / page)
    record = MetricRecord(
        "lengthratio",
        "tests.plugins:LengthRatio",
        "length of the translation over the reference's",
        ("length_ratio",),
        targets={"length_ratio": 1.0},
        settings={
            "unit": {"description": "What is counted.", "type": "string", "default": "chars"}
        },
    )
    monkeypatch.setattr(records, "RECORDS", MappingProxyType({**RECORDS, "lengthratio": record}))
    monkeypatch.setattr(docs, "RECORDS", records.RECORDS)
    assert stale_pages(tmp_path) == ["config/README.md", "docs/metrics.md"]
    assert docs.write_docs(tmp_path) == [
        "config/README.md",
        "docs/metrics.md",
        f"workflow/schemas/{COMPLETE_SCHEMA}",
    ]
    assert not stale_pages(tmp_path)
    readme = (tmp_path / "config" / "README.md").read_text(encoding="utf-8")
    assert "| `lengthratio` |  |  | length of the translation over the reference's: " in readme
    assert '| `lengthratio.unit` | `"chars"` | What is counted. |' in readme
    table = (tmp_path / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert "`length_ratio` (closest to 1 is best)" in table
    schema = json.loads(
        (tmp_path / "workflow" / "schemas" / COMPLETE_SCHEMA).read_text(encoding="utf-8")
    )
    assert "lengthratio" in schema["properties"]["metrics"]["items"]["anyOf"][0]["enum"]
    assert schema["properties"]["lengthratio"]["properties"]["unit"]["default"] == "chars"
