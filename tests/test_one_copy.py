"""One copy of the code per run: started from one checkout's Snakefile in an environment where
another checkout is installed, the main process and every job import the package of the
checkout whose Snakefile runs. Without PYTHONPATH, which the other tests set for every process
they start (conftest.py) and which would hide the installed copy."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import yaml

from .conftest import REPOSITORY, SAMPLE, SNAKEFILE

PACKAGES = ("bouquet_eval", "snakemake_logger_plugin_bouquet")

# Imported by every Python of the environment: at exit, which of the packages' modules it
# imported, and from where.
PROBE = """
import atexit, json, os, sys

def _record():
    modules = {
        name: getattr(module, "__file__", None)
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in ("bouquet_eval", "snakemake_logger_plugin_bouquet")
    }
    path = os.path.join(os.environ["PROBE_DIR"], f"{os.getpid()}.json")
    with open(path, "w") as handle:
        json.dump({"argv": sys.argv, "modules": modules}, handle)

if os.environ.get("PROBE_DIR"):
    atexit.register(_record)
"""


def printed(python: Path, code: str) -> str:
    """What `code` prints, run by `python` without PYTHONPATH."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([str(python), "-c", code], env=environment, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def installed_elsewhere(env: Path) -> Path:
    """An environment with the main environment's packages, and a copy of the package installed
    into it as a wheel installs it (another checkout's); returns its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site_packages = Path(
        printed(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    )
    # The main environment's packages, without the .pth files that put this checkout first.
    (site_packages / "main-environment.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n", encoding="utf-8"
    )
    for package in PACKAGES:
        shutil.copytree(REPOSITORY / "scripts" / package, site_packages / package)
    (site_packages / "probe_imports.py").write_text(PROBE, encoding="utf-8")
    (site_packages / "probe_imports.pth").write_text("import probe_imports\n", encoding="utf-8")
    return python


def test_a_run_imports_the_package_of_its_checkout_in_every_process(tmp_path: Path) -> None:
    python = installed_elsewhere(tmp_path / "env")
    other = Path(printed(python, "import bouquet_eval; print(bouquet_eval.__file__)")).parent
    assert not other.is_relative_to(REPOSITORY), "the other copy is this checkout"
    work = tmp_path / "work"
    work.mkdir()
    config = work / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": {"path": str(SAMPLE)},
                "directions": {"list": ["eng_Latn-fra_Latn"]},
                "limit": 2,
                "shards": 1,
                "metrics": ["chrf"],
                "models": [{"name": "copy", "translator": "copy-source"}],
            }
        ),
        encoding="utf-8",
    )
    probes = tmp_path / "probes"
    probes.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [str(python), "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--cores", "2",
         "--configfile", str(config)],
        cwd=work,
        env={**environment, "PROBE_DIR": str(probes)},
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (work / "runs" / "leaderboard.csv").is_file()
    records = [json.loads(path.read_text()) for path in probes.glob("*.json")]
    importing = [r for r in records if any(n.startswith("bouquet_eval") for n in r["modules"])]
    snakemake = [r for r in importing if r["argv"][0].endswith("snakemake/__main__.py")]
    main = [r for r in snakemake if "--mode" not in r["argv"]]
    scripts = [r for r in importing if r not in snakemake]
    # The main process, and each job's script (run by the local executor in a Python of its
    # own; a cluster's jobs have a Snakemake process each, which parses the Snakefile too).
    assert len(main) == 1 and len(scripts) == 5, [r["argv"][:3] for r in records]
    ours = REPOSITORY / "scripts" / "bouquet_eval"
    for record in importing:
        elsewhere = {
            name: file
            for name, file in record["modules"].items()
            if name.startswith("bouquet_eval") and file and not Path(file).is_relative_to(ours)
        }
        assert not elsewhere, (record["argv"][:4], sorted(elsewhere.items())[:5])
