"""Messages say what is true, and name the file, the direction and the row (counted from 1)."""

from __future__ import annotations

import json
import tarfile
import textwrap
from pathlib import Path

from .conftest import PLUGINS, Workflow, python_path
from .workflow_configs import bounds_config, recording_model

# Fills the file system of its folder, then answers: the job's own writes find it full.
FILLING_TRANSLATOR = textwrap.dedent(
    """
    import os


    class FillsTheDisk:
        def __init__(self, folder):
            self.folder = folder

        def translate(self, prompts):
            handle = os.open(os.path.join(self.folder, "filler"), os.O_WRONLY | os.O_CREAT)
            try:
                while True:
                    os.write(handle, b"0" * 65536)
            except OSError:
                pass
            finally:
                os.close(handle)
            return ["x"] * len(prompts)
    """
)


def test_a_full_disk_in_a_translate_job_names_the_file_and_the_direction(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    (tmp_path / "filling.py").write_text(FILLING_TRANSLATOR, encoding="utf-8")
    small = tmp_path / "small"  # a file system of 1 MiB, mounted in the run's namespace
    small.mkdir()
    config = bounds_config(dataset, directions={"list": ["eng_Latn-deu_Latn"]}, limit=3)
    config["output_dir"] = str(small / "runs")
    config["models"] = [
        {
            "name": "fill",
            "translator": "filling:FillsTheDisk",
            "translator_kwargs": {"folder": str(small)},
        }
    ]
    workflow.write_config(config)
    mount = f'mount -t tmpfs -o size=1m tmpfs "{small}" && exec "$@"'
    result = workflow.run(
        check=False,
        env={"PYTHONPATH": python_path(PLUGINS, tmp_path)},
        prefix=("unshare", "--map-root-user", "--mount", "sh", "-c", mount, "sh"),
    )
    assert result.returncode != 0
    log = next((workflow.workdir / "logs" / "fill" / "translate").glob("*.log")).read_text()
    last = log.strip().splitlines()[-1]
    assert "job failed: TranslationError: model fill, direction eng_Latn-deu_Latn: its " in last
    assert "translations cannot be written: [Errno 28] No space left on device: '" in last
    assert f"{small}/runs/fill/" in last and "eng_Latn-deu_Latn.jsonl'" in last


def test_a_models_files_carry_that_model_alone(workflow: Workflow, dataset: Path) -> None:
    """Another model's settings appear in none of a model's files: manifest, provenance
    records, submission folder and archive."""
    marker = "value-of-model-b-only"
    config = bounds_config(dataset, directions={"list": ["eng_Latn-deu_Latn"]}, limit=2)
    config["models"] = [
        {"name": "a", "translator": "copy-source"},
        recording_model("b", workflow.workdir / "record.txt", suffix=marker),
    ]
    workflow.write_config(config)
    workflow.run("all", "submission")
    runs = workflow.workdir / "runs"
    files_of_a = [
        *(runs / "a").rglob("*"),
        *(runs / "submission" / "a").rglob("*"),
    ]
    holding = [str(p) for p in files_of_a if p.is_file() and marker.encode() in p.read_bytes()]
    assert holding == []
    with tarfile.open(runs / "submission" / "a.tar.gz") as archive:
        for member in archive.getmembers():
            content = archive.extractfile(member)
            assert content is None or marker.encode() not in content.read(), member.name
    manifest = json.loads((runs / "a" / "manifest.json").read_text())
    assert [m["name"] for m in manifest["entries"][-1]["config"]["models"]] == ["a"]
    # Model b's own files do hold its settings.
    assert marker in (runs / "b" / "manifest.json").read_text()
