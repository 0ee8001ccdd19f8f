"""The workflow used as a module of another one, from a folder of its own, by a Python that has
Snakemake and the dependencies but not bouquet_eval: the demo runs to the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.core.version import package_version

from .conftest import REPOSITORY, SNAKEFILE

HOST_SNAKEFILE = """\
configfile: "config/demo.yaml"


module bouquet:
    snakefile:
        "{snakefile}"
    config:
        config


use rule * from bouquet


# Snakemake runs the handlers of the main Snakefile only: the module's are called from it.
onstart:
    bouquet.onstart()


onerror:
    bouquet.onerror()
"""


@pytest.fixture(scope="module")
def python_without_the_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment that sees this one's packages, bouquet_eval's excepted (no module,
    no metadata): what a deployment's environment without the workflow installed looks like."""
    folder = tmp_path_factory.mktemp("environment")
    packages = folder / "packages"
    packages.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if "bouquet" not in entry.name and entry.suffix != ".pth":
            (packages / entry.name).symlink_to(entry)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder / "venv"], check=True)
    (folder / "venv").joinpath(
        Path(sysconfig.get_path("purelib")).relative_to(sys.prefix), "dependencies.pth"
    ).write_text(f"{packages}\n")
    python = folder / "venv" / "bin" / "python"
    probe = subprocess.run(
        [python, "-c", "import snakemake, pandas; import bouquet_eval"],
        env=environment_without_the_package(),
        capture_output=True,
        text=True,
    )
    assert "No module named 'bouquet_eval'" in probe.stderr, probe.stderr
    return python


def environment_without_the_package() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "BOUQUET_EVAL_HOME")
    }


def run_demo(
    python: Path, host: Path, *arguments: str, environment: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The demo's models and directions, in one job per model and stage (time)."""
    result = subprocess.run(
        [python, "-m", "snakemake", "--cores", "2", *arguments, "--config", "shards=1"],
        cwd=host,
        env={**environment_without_the_package(), **(environment or {})},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    return result


def check_demo_outputs(
    workdir: Path, sources: Path, models: tuple[str, ...] = ("copy-source", "reference")
) -> None:
    """The demo's outputs, from the sample of the workflow's files at `sources`."""
    sample = sources / "data" / "sample" / "parquet"
    for model in models:
        scores = pd.read_csv(workdir / "runs" / model / "scores.csv")
        assert len(scores) == len(list(sample.iterdir()))
        manifest = json.loads((workdir / "runs" / model / "manifest.json").read_text())
        (entry,) = manifest["entries"]
        assert entry["dataset"]["path"] == str(sample)
        assert entry["bouquet_eval_version"] == package_version() != "unknown"
    reference = pd.read_csv(workdir / "runs" / "reference" / "scores.csv")
    assert (reference["chrfpp"] == 100).all()


def test_the_demo_through_a_module_declaration(
    python_without_the_package: Path, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    (host / "config").mkdir(parents=True)
    (host / "config" / "demo.yaml").write_text((REPOSITORY / "config" / "demo.yaml").read_text())
    (host / "Snakefile").write_text(HOST_SNAKEFILE.format(snakefile=SNAKEFILE))
    run_demo(python_without_the_package, host)
    check_demo_outputs(host, REPOSITORY)
    # The module's onstart recorded the run: its command line is in the manifest.
    manifest = json.loads((host / "runs" / "reference" / "manifest.json").read_text())
    (entry,) = manifest["entries"]
    assert entry["command"][-2:] == ["--config", "shards=1"], entry["command"]


GITHUB_URL = "https://github.com/bouquet-tests/bouquet-eval"


def github_stand_in(tmp_path: Path) -> dict[str, str]:
    """A git repository of this checkout's files, tagged v1, that git fetches in place of
    GITHUB_URL (a `url.insteadOf` rule in a git configuration of its own); the environment
    variables that make git, and Snakemake's source cache, use them."""
    origin = tmp_path / "origin"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPOSITORY,
        capture_output=True,
        check=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPOSITORY / name
        if source.is_file():
            (origin / name).parent.mkdir(parents=True, exist_ok=True)
            (origin / name).write_bytes(source.read_bytes())
    git_config = tmp_path / "gitconfig"
    git_config.write_text(
        f'[user]\n\tname = test\n\temail = test@example.org\n[url "file://{origin}"]\n'
        f"\tinsteadOf = {GITHUB_URL}\n"
    )
    environment = {
        "GIT_CONFIG_GLOBAL": str(git_config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    git = {**os.environ, **environment}
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "v1"], ["tag", "v1"]):
        subprocess.run(["git", *command], cwd=origin, env=git, check=True)
    return environment


def test_the_demo_deployed_by_snakedeploy_from_github(
    python_without_the_package: Path, tmp_path: Path
) -> None:
    """`snakedeploy deploy-workflow <github url> --tag v1`, then the demo through the
    `github(...)` module it declares: the workflow's files come from git, not from disk."""
    environment = github_stand_in(tmp_path)
    deployment = tmp_path / "deployment"
    snakedeploy = Path(sys.executable).parent / "snakedeploy"
    subprocess.run(
        [snakedeploy, "deploy-workflow", GITHUB_URL, deployment, "--tag", "v1"],
        env={**os.environ, **environment},
        capture_output=True,
        check=True,
    )
    declared = (deployment / "workflow" / "Snakefile").read_text()
    assert 'github("bouquet-tests/bouquet-eval", path="workflow/Snakefile", tag="v1")' in declared
    # One of the demo's two models, for time: the other runs the same jobs.
    run_demo(
        python_without_the_package,
        deployment,
        "runs/reference/scores.csv",
        "--configfile",
        "config/demo.yaml",
        environment=environment,
    )
    (copy,) = (deployment / ".snakemake" / "bouquet-eval-sources").iterdir()
    check_demo_outputs(deployment, copy, models=("reference",))
