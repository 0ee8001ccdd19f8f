"""Secrets stay out of what a real run writes and prints: a failing job's log, console output
and error, and the command line that the manifest records."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from .conftest import Workflow, python_path
from .workflow_configs import bounds_config

DEU = "eng_Latn-deu_Latn"


def files_holding(folder: Path, text: str) -> list[Path]:
    return [
        path for path in folder.rglob("*") if path.is_file() and text.encode() in path.read_bytes()
    ]


def test_a_translator_that_fails_with_its_key_leaks_it_nowhere(
    workflow: Workflow, dataset: Path
) -> None:
    key = "LEAKYSECRET_77777"
    model = {
        "name": "leaky",
        "translator": "faults:LeakyTranslator",
        "translator_kwargs": {"token_env": "MY_TOK"},
    }
    workflow.write_config(bounds_config(dataset, directions={"list": [DEU]}, models=[model]))
    failed = workflow.run(check=False, env={"MY_TOK": key})
    assert failed.returncode != 0
    printed = failed.stdout + failed.stderr
    # The failure is still told, in the log as on the console, the key redacted.
    told = "401 Unauthorized for key <redacted>"
    logs = "".join(path.read_text() for path in (workflow.workdir / "logs").rglob("*.log"))
    assert f"job failed: TranslationError: model leaky, direction {DEU}: " in logs
    assert told in logs and told in printed
    assert "Traceback" in logs and "Bearer <redacted>" in logs  # the chained cause too
    assert key not in printed
    assert files_holding(workflow.workdir, key) == []


def test_secrets_given_on_the_command_line_are_recorded_redacted(
    workflow: Workflow, dataset: Path
) -> None:
    secrets = ("hunter2xyz", "ZZZTOP987", "has space inside")
    models = (
        "models=[{name: cli, translator: faults:EchoTranslator, translator_kwargs: {"
        'password: hunter2xyz, headers: {"Authorization":"Bearer ZZZTOP987"}, '
        'client_secret: "has space inside", pad_token: "<pad>", eos_token_id: 2}}]'
    )
    workflow.write_config(bounds_config(dataset, directions={"list": [DEU]}))
    run = workflow.run("--config", models)
    manifest = json.loads((workflow.workdir / "runs" / "cli" / "manifest.json").read_text())
    entry = manifest["entries"][0]
    # The recorded command still reads as the command that was run.
    assert entry["command"][-4:-2] == [
        "--config",
        "models=[{name: cli, translator: faults:EchoTranslator, translator_kwargs: {"
        'password: <redacted>, headers: {"Authorization":"<redacted>"}, '
        'client_secret: "<redacted>", pad_token: "<pad>", eos_token_id: 2}}]',
    ]
    settings = entry["model"]["settings"]
    assert settings["pad_token"] == "<pad>" and settings["eos_token_id"] == "2"
    # Literal secrets are warned about; the tokenizer's settings are no secrets.
    assert "literal value at 'models[0].translator_kwargs.password'" in run.stderr
    assert "literal value at 'models[0].translator_kwargs.pad_token'" not in run.stderr
    assert "literal value at 'models[0].translator_kwargs.eos_token_id'" not in run.stderr
    # Nor in Snakemake's banner, on the console and in its own log.
    (snakemake_log,) = (workflow.workdir / ".snakemake" / "log").glob("*.snakemake.log")
    assert "password: <redacted>" in snakemake_log.read_text()
    for secret in secrets:
        assert secret not in run.stdout + run.stderr, secret
        for folder in ("runs", "logs", ".snakemake/log"):
            assert files_holding(workflow.workdir / folder, secret) == [], secret


STOPPED = textwrap.dedent(
    """
    import os, sys
    from bouquet_eval.jobs import job_logging

    with job_logging(sys.argv[1]):
        sys.exit("stopped: the Hub refused " + os.environ["HF_TOKEN"])
    """
)


def test_a_job_that_exits_with_a_message_prints_no_known_secret(tmp_path: Path) -> None:
    """Python prints the message of a SystemExit that leaves the job: it goes out redacted."""
    key, log = "hf_secret_0123456789", tmp_path / "job.log"
    child = subprocess.run(
        [sys.executable, "-c", STOPPED, str(log)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(), "PATH": "", "HF_TOKEN": key},
        timeout=60,
    )
    assert child.returncode == 1
    assert child.stderr.splitlines()[-1] == "stopped: the Hub refused <redacted>"
    assert "job stopped" in log.read_text()
    assert key not in child.stderr and key not in log.read_text()
