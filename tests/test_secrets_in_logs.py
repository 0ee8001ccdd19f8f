"""Secrets stay out of what a real run writes and prints: a failing job's log, console output
and error, and the command line that the manifest records."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from .chat_server import ChatServer, answer
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


def test_an_endpoint_that_echoes_its_key_leaks_it_into_no_file(
    workflow: Workflow, dataset: Path
) -> None:
    """Every answer ends with the request's credentials: the translations, the request cache,
    the scores, the report and the submission hold the answers with the key redacted."""
    key = "sk-ECHOED-0123456789"
    with ChatServer(default=answer(echo_authorization=True)) as server:
        model = {
            "name": "echo",
            "translator": "openai",
            "model": "test-model",
            "base_url": server.url,
            "api_key_env": "ECHO_KEY",
        }
        directions = {"list": [DEU, "eng_Latn-fra_Latn"]}
        workflow.write_config(bounds_config(dataset, directions=directions, models=[model]))
        workflow.run("all", "submission", env={"ECHO_KEY": key})
        assert all(key in str(request.headers) for request in server.chat_requests)
    folder = workflow.workdir / "runs" / "echo"
    lines = (folder / f"{DEU}.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines and all(
        json.loads(line)["mt_text"].endswith(" [Bearer <redacted>]") for line in lines
    )
    assert files_holding(workflow.workdir, key) == []
    assert (workflow.workdir / "runs" / "submission" / "echo.tar.gz").is_file()


def test_a_secret_given_on_the_command_line_stops_the_run_before_it_is_logged(
    workflow: Workflow, dataset: Path
) -> None:
    """Snakemake prints its command line (banner, .snakemake/log/) once the workflow is parsed,
    and parsing stops at a secret in the configuration, --config items included."""
    secret = "hunter2xyz"
    models = (
        "models=[{name: cli, translator: faults:EchoTranslator, translator_kwargs: {"
        f'headers: {{"Authorization": "Bearer {secret}"}}, pad_token: "<pad>"}}}}]'
    )
    workflow.write_config(bounds_config(dataset, directions={"list": [DEU]}))
    stopped = workflow.run("--config", models, check=False)
    assert stopped.returncode == 1
    # No file is named: the configuration file does not hold the key.
    assert (
        "\nbouquet-eval: models[0].translator_kwargs.headers.Authorization holds a value under a "
        "secret name: the configuration never holds a secret"
    ) in stopped.stderr
    assert secret not in stopped.stdout + stopped.stderr
    assert files_holding(workflow.workdir, secret) == []
    # Snakemake had opened its log: the command line never reached it.
    (snakemake_log,) = (workflow.workdir / ".snakemake" / "log").glob("*.snakemake.log")
    assert "--config" not in snakemake_log.read_text()
    # The same item without the secret runs (the tokenizer's setting is no secret),
    run = workflow.run("--config", models.replace(f'"Authorization": "Bearer {secret}"', "n: 1"))
    assert "bouquet-eval: models[0]" not in run.stderr
    # whose command line Snakemake logs, once the workflow is parsed.
    logged = [path.read_text() for path in (workflow.workdir / ".snakemake" / "log").iterdir()]
    assert sum("--config" in text for text in logged) == 1
    manifest = json.loads((workflow.workdir / "runs" / "cli" / "manifest.json").read_text())
    assert manifest["entries"][0]["model"]["settings"]["pad_token"] == "<pad>"


STOPPED = textwrap.dedent(
    """
    import os, sys
    from bouquet_eval.core.jobs import job_logging

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
