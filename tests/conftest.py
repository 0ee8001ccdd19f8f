from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
SNAKEFILE = REPOSITORY / "workflow" / "Snakefile"
SAMPLE = REPOSITORY / "data" / "sample" / "parquet"
PLUGINS = Path(__file__).resolve().parent / "plugins"


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A private copy of the bundled sample, which a test may alter."""
    copy = tmp_path / "dataset"
    shutil.copytree(SAMPLE, copy)
    return copy


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Llama (tiny_llama.py), built once for every test that runs it."""
    from .tiny_llama import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread: two spin against each other, and against the
    other processes of a busy machine (a test took 20 times longer)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def environment_python(family: str, name: str) -> Path:
    """The Python of the Makefile's environment of a family of metrics (`.venv-<name>`, from
    envs/<name>-requirements.txt); the calling test module is skipped, saying so, where it is
    not built."""
    python = REPOSITORY / f".venv-{name}" / "bin" / "python"
    if not python.exists():
        pytest.skip(
            f"{python} does not exist: these tests need {family}'s environment (the Makefile's "
            f".venv-{name}, from envs/{name}-requirements.txt)",
            allow_module_level=True,
        )
    return python


def built_in(python: Path, builder: str, folder: Path) -> dict[str, str]:
    """What `build_all(folder)` of the module `builder` (tiny checkpoints) built, by name, run
    by another environment's Python (`python`), which has what it needs."""
    build = (
        f"import json, sys; from pathlib import Path; from {builder} import build_all; "
        "print(json.dumps({k: str(v) for k, v in build_all(Path(sys.argv[1])).items()}))"
    )
    built = subprocess.run(
        [str(python), "-c", build, str(folder)],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(built.stdout.strip().splitlines()[-1])


def python_path(*folders: Path) -> str:
    """PYTHONPATH with `folders` first and this checkout's package before any installed one."""
    inherited = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    package = str(REPOSITORY / "scripts")
    return os.pathsep.join([*map(str, folders), package, *(e for e in inherited if e != package)])


# Every process a test starts imports this checkout's package, whichever checkout the
# environment was installed from.
os.environ["PYTHONPATH"] = python_path()


class Workflow:
    """Runs the workflow in a subprocess from a scratch working directory, as users do."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.config_path = workdir / "config.yaml"

    def write_config(self, config: dict) -> Path:
        self.config_path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
        return self.config_path

    def command(self, *arguments: str) -> list[str]:
        """The snakemake command line of a run in this working directory."""
        return [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(SNAKEFILE),
            "--directory",
            str(self.workdir),
            "--cores",
            "2",
            # Targets first: --configfile takes every argument that follows it.
            *arguments,
            *(["--configfile", str(self.config_path)] if self.config_path.exists() else []),
        ]

    @staticmethod
    def environment(env: dict | None = None) -> dict[str, str]:
        """The environment of a run: the test plugins and this checkout's package first."""
        return {**os.environ, "PYTHONPATH": python_path(PLUGINS), **(env or {})}

    def start(self, *arguments: str) -> subprocess.Popen:
        """A run in the background; its output (stdout and stderr) is read from `stdout`."""
        return subprocess.Popen(
            self.command(*arguments),
            cwd=self.workdir.parent,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(
        self,
        *arguments: str,
        check: bool = True,
        env: dict | None = None,
        prefix: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [*prefix, *self.command(*arguments)],
            cwd=self.workdir.parent,
            env=self.environment(env),
            capture_output=True,
            text=True,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"snakemake failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result

    def planned_jobs(self, *arguments: str, env: dict | None = None) -> dict[str, int]:
        """Rule name -> number of jobs in a dry run's plan."""
        output = self.run("--dry-run", "--quiet", "rules", *arguments, env=env).stdout
        counts: dict[str, int] = {}
        in_table = False
        for line in output.splitlines():
            if line.startswith("job ") and "count" in line:
                in_table = True
                continue
            if in_table:
                parts = line.split()
                if not parts or parts[0] == "total":
                    break
                if parts[0].startswith("-"):
                    continue
                counts[parts[0]] = int(parts[1])
        return counts


@pytest.fixture
def workflow(tmp_path: Path) -> Workflow:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return Workflow(workdir)


def patience(seconds: float) -> float:
    """`seconds` that something takes at most on an idle machine, scaled by how busy its cores
    are now (the load average per core, at least 1): a time bound that still holds when other
    work shares the machine, for a timeout the code under test is given, or for how long to
    wait for what must happen. Tests assert outcomes, never how long they took."""
    return seconds * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def wait_until(condition: Callable[[], bool], seconds: float) -> None:
    """Polls `condition` until it holds; fails the test after `patience(seconds)`."""
    bound = patience(seconds)
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {bound:.0f} s")
        time.sleep(0.02)


def files_under(folder: Path) -> set[Path]:
    """Every file below `folder` (to list what a run wrote, before and after)."""
    return {path for path in folder.rglob("*") if not path.is_dir()}
