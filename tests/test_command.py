"""The `bouquet-eval` command: its flags, the configuration they make, and real runs of the
workflow through it, as the original tool's README writes its commands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bouquet_eval.command import cli
from bouquet_eval.command.config import SAVED_CONFIG, build_config, model_folder
from bouquet_eval.command.run import paths_made_absolute, snakemake_arguments
from bouquet_eval.core.config import ConfigError
from bouquet_eval.data.dataset import Direction
from bouquet_eval.planning.schema import validate_config
from bouquet_eval.planning.sharding import assign_shards, take_part

from .chat_server import ChatServer
from .conftest import REPOSITORY, SAMPLE, Workflow
from .synthetic import synthetic_directions, write_dataset

SCHEMA = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"
SAMPLE_DIRECTIONS = sorted(Direction.parse(path.stem) for path in SAMPLE.glob("*.parquet"))
ENGLISH_OUT = [d.name for d in SAMPLE_DIRECTIONS if d.src_lang == "eng_Latn"]


def configured(command: str, *flags: str, folder: Path) -> dict:
    """The validated configuration that `bouquet-eval <command> <flags>` runs."""
    arguments = cli.build_parser(command).parse_args([*flags, "--output-dir", str(folder)])
    config = build_config(command, arguments, model_folder(folder))
    return validate_config(config, SCHEMA)


def at(config: dict, key: str):
    value = config
    for part in key.replace("[0]", ".0").split("."):
        value = value[int(part)] if part.isdigit() else value[part]
    return value


VLLM = ("--backend", "vllm", "--model", "org/model", "--all")
OPENAI = ("--backend", "openai", "--model", "gpt-x", "--all")

# Every flag of the original CLI reference and "useful flags", with the key it must reach.
FLAGS = [
    (("--all", "--model", "m"), "directions.list", []),
    (("--model", "m", "--src-lang", "eng_Latn", "--src-lang", "fra_Latn"),
     "directions.src_langs", ["eng_Latn", "fra_Latn"]),
    (("--model", "m", "--tgt-lang", "deu_Latn"), "directions.tgt_langs", ["deu_Latn"]),
    (("--model", "m", "--directions", "eng_Latn-fra_Latn,eng_Latn-deu_Latn"),
     "directions.list", ["eng_Latn-fra_Latn", "eng_Latn-deu_Latn"]),
    ((*VLLM, "--shard", "3/8"), "directions.shard", "3/8"),
    ((*VLLM, "--limit", "5"), "limit", 5),
    (VLLM, "models[0].translator", "vllm"),
    (OPENAI, "models[0].translator", "openai"),
    (VLLM, "models[0].model", "org/model"),
    ((*VLLM, "--system-prompt", "Be brief."), "models[0].system_prompt", "Be brief."),
    ((*OPENAI, "--temperature", "0.7"), "models[0].temperature", 0.7),
    ((*VLLM, "--seed", "7"), "models[0].seed", 7),
    ((*VLLM, "--tensor-parallel-size", "4"), "models[0].tensor_parallel_size", 4),
    ((*VLLM, "--dtype", "bfloat16"), "models[0].dtype", "bfloat16"),
    ((*VLLM, "--max-model-len", "4096"), "models[0].max_model_len", 4096),
    ((*VLLM, "--gpu-memory-utilization", "0.8"), "models[0].gpu_memory_utilization", 0.8),
    ((*VLLM, "--deterministic"), "models[0].deterministic", True),
    ((*OPENAI, "--base-url", "http://localhost:8000/v1"), "models[0].base_url",
     "http://localhost:8000/v1"),
    ((*OPENAI, "--api-key-env", "MY_KEY"), "models[0].api_key_env", "MY_KEY"),
    ((*OPENAI, "--concurrency", "64"), "models[0].concurrency", 64),
    ((*VLLM, "--metrics", "chrf,glotlid"), "metrics", ["chrf", "glotlid"]),
    ((*VLLM, "--metricx-model", "google/metricx-24-hybrid-large-v2p6"), "metricx.model",
     "google/metricx-24-hybrid-large-v2p6"),
    ((*VLLM, "--metricx-device", "cuda:1"), "metricx.device", "cuda:1"),
    ((*VLLM, "--metricx-qe"), "metricx.qe", True),
    ((*VLLM, "--glotlid-model", "cis-lmu/glotlid/model_v2.bin"), "glotlid.model",
     "cis-lmu/glotlid/model_v2.bin"),
    ((*VLLM, "--comet-model", "Unbabel/wmt20-comet-da"), "comet.model",
     "Unbabel/wmt20-comet-da"),
    ((*VLLM, "--comet-device", "cpu"), "comet.device", "cpu"),
    ((*VLLM, "--cometkiwi-model", "Unbabel/wmt23-cometkiwi-da-xl"), "cometkiwi.model",
     "Unbabel/wmt23-cometkiwi-da-xl"),
    ((*VLLM, "--cometkiwi-device", "cuda:1"), "cometkiwi.device", "cuda:1"),
    ((*VLLM, "--xcomet-model", "Unbabel/XCOMET-XXL"), "xcomet.model", "Unbabel/XCOMET-XXL"),
    ((*VLLM, "--xcomet-device", "cpu"), "xcomet.device", "cpu"),
    ((*VLLM, "--metricx-tokenizer", "google/mt5-xxl"), "metricx.tokenizer", "google/mt5-xxl"),
    ((*VLLM, "--blaser-encoder", "org/sonar"), "blaser.encoder", "org/sonar"),
    ((*VLLM, "--blaser-checkpoint", "org/blaser"), "blaser.checkpoint", "org/blaser"),
    ((*VLLM, "--blaser-device", "cpu"), "blaser.device", "cpu"),
    ((*VLLM, "--blaser-qe-encoder", "org/sonar"), "blaser_qe.encoder", "org/sonar"),
    ((*VLLM, "--blaser-qe-checkpoint", "org/qe"), "blaser_qe.checkpoint", "org/qe"),
    ((*VLLM, "--blaser-qe-device", "cuda:1"), "blaser_qe.device", "cuda:1"),
    ((*VLLM, "--environment", "comet=/envs/comet/bin/python", "--environment",
      "metrics=/envs/m/bin/python"), "environments",
     {"comet": "/envs/comet/bin/python", "metrics": "/envs/m/bin/python"}),
    (("--all", "--translator", "mypackage.translators:MyTranslator"), "models[0].translator",
     "mypackage.translators:MyTranslator"),
    (("--all", "--translator", "pkg.mod:T", "--translator-kwargs",
      '{"model_path": "/path", "thinking": true}'), "models[0].translator_kwargs",
     {"model_path": "/path", "thinking": True}),
    ((*VLLM, "--prompt-fn", "mypackage.prompts:few_shot_prompt"), "models[0].prompt_fn",
     "mypackage.prompts:few_shot_prompt"),
    ((*VLLM, "--prompt-fn", "mypackage.prompts:make_rag_prompt", "--prompt-kwargs",
      '{"index_path": "/data/my-index", "k": 4}'), "models[0].prompt_kwargs",
     {"index_path": "/data/my-index", "k": 4}),
    ((*VLLM, "--dataset-revision", "abc123"), "dataset.revision", "abc123"),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "key", "value"), FLAGS, ids=[f[1] for f in FLAGS])
def test_every_flag_reaches_its_configuration_key(tmp_path: Path, flags, key, value) -> None:
    config = configured("run", *flags, folder=tmp_path / "my-model")
    assert at(config, key) == value
    assert config["models"][0]["name"] == "my-model" and config["output_dir"] == ".."


METAEVAL_FLAGS = [
    (("--judgements", "met-bouquet"), "metaeval.judgements", "met-bouquet"),
    (("--judgements-revision", "abc123"), "metaeval.revision", "abc123"),
    (("--judgements", "met-bouquet", "--metrics", "chrf,bleu"), "metrics", ["chrf", "bleu"]),
]


@pytest.mark.parametrize(
    ("flags", "key", "value"), METAEVAL_FLAGS, ids=[f[1] for f in METAEVAL_FLAGS]
)
def test_metaeval_flags_reach_their_keys(tmp_path: Path, flags, key, value) -> None:
    config = configured("metaeval", *flags, folder=tmp_path / "judged")
    assert at(config, key) == value
    # A fresh folder: one model that needs nothing, every direction (no job of theirs runs).
    assert config["models"] == [{"name": "judged", "translator": "reference"}]


def test_judgements_path_is_made_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = configured("metaeval", "--judgements", "mine.csv", folder=tmp_path / "m")
    assert config["metaeval"]["judgements"] == str(tmp_path / "mine.csv")


def test_the_reference_lists_no_flag_left_untested() -> None:
    tested = {flag for flags, _, _ in FLAGS for flag in flags if flag.startswith("--")}
    tested |= {flag for flags, _, _ in METAEVAL_FLAGS for flag in flags if flag.startswith("--")}
    assert set(cli.FLAG_KEYS) - {"--output-dir"} <= tested | {"--dataset-path"}


def test_paths_given_to_the_command_mean_what_they_meant_where_it_was_typed(
    tmp_path: Path, monkeypatch
) -> None:
    """A COMET checkpoint folder, BLASER's encoder folder and environments' Pythons, relative
    to where the command is typed, in its flags and in configuration given to Snakemake after
    `--`; hub ids stay."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "sonar").mkdir()
    config = configured(
        "run", *VLLM, "--metrics", "chrf,comet,xcomet,blaser", "--comet-model", "ckpt",
        "--xcomet-model", "Unbabel/XCOMET-XL", "--environment", "comet=.venv-comet/bin/python",
        "--blaser-encoder", "sonar", "--environment", "blaser=../blaser/bin/python",
        folder=tmp_path / "runs" / "m",
    )  # fmt: skip
    assert config["comet"]["model"] == str(tmp_path / "ckpt")
    assert config["xcomet"]["model"] == "Unbabel/XCOMET-XL"
    assert config["blaser"]["encoder"] == str(tmp_path / "sonar")
    assert config["environments"] == {
        "comet": str(tmp_path / ".venv-comet/bin/python"),
        "blaser": str(tmp_path / "../blaser/bin/python"),
    }
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        yaml.safe_dump(
            {"comet": {"model": "./ckpt", "device": "cpu"}, "blaser_qe": {"encoder": "sonar"}}
        )
    )
    folder = tmp_path / "runs" / "m"
    extra = paths_made_absolute(
        ["--config", "environments={comet: .venv-comet/bin/python}", "limit=2",
         "--configfile", "mine.yaml", "--quiet"],
        folder,
    )  # fmt: skip
    python = json.dumps({"comet": str(tmp_path / ".venv-comet/bin/python")})
    assert extra[:4] == ["--config", f"environments={python}", "limit=2", "--quiet"]
    assert extra[4] == "--configfile" and len(extra) == 6
    copied = Path(extra[5])
    assert copied.parent == folder / "logs" / "bouquet-eval"
    assert yaml.safe_load(copied.read_text())["comet"] == {
        "model": str(tmp_path / "ckpt"),
        "device": "cpu",
    }
    assert yaml.safe_load(copied.read_text())["blaser_qe"] == {"encoder": str(tmp_path / "sonar")}
    assert copied.read_text().startswith(f"# {mine.absolute()}, with its paths made absolute")
    # A file without a relative path is given as it is.
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"comet": {"model": "Unbabel/wmt22-comet-da"}}))
    assert paths_made_absolute(["--configfile", str(plain)], folder) == [
        "--configfile",
        str(plain),
    ]


def test_dataset_path_is_made_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = configured("run", *VLLM, "--dataset-path", "data/x", folder=tmp_path / "m")
    assert config["dataset"]["path"] == str(tmp_path / "data" / "x")


def test_seq2seq_adapters_as_the_original_readme_writes_them(tmp_path: Path) -> None:
    config = configured(
        "run",
        "--translator", "bouquet_eval.translators.hf_seq2seq:NLLBTranslator",
        "--translator-kwargs", '{"model":"facebook/nllb-200-3.3B","num_beams":5}',
        "--prompt-fn", "bouquet_eval.translators.hf_seq2seq:nllb_prompt",
        "--all",
        folder=tmp_path / "nllb-200-3.3B",
    )  # fmt: skip
    (model,) = config["models"]
    # The built-in translator, with its own prompt function, settings checked and GPU known.
    assert (model["translator"], model["model"], model["num_beams"]) == (
        "nllb",
        "facebook/nllb-200-3.3B",
        5,
    )
    assert "prompt_fn" not in model and model["device"] == "auto"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--backend", "openai", "--model", "m", "--all", "--dtype", "float16"), "--dtype"),
        (("--all",), "name a translator"),
        (("--model", "m"), "select directions"),
        (("--model", "m", "--all", "--prompt-kwargs", "{}"), "--prompt-kwargs"),
        (("--translator", "a.b:C", "--all", "--translator-kwargs", "[1]"), "JSON object"),
        # Counted from 1, with the decoder's whole reason.
        (("--translator", "a.b:C", "--all", "--translator-kwargs", '{"k": x}'),
         "--translator-kwargs: column 7: not valid JSON: Expecting value, found 'x'"),
    ],
)  # fmt: skip
def test_flags_that_cannot_be_run_are_named(tmp_path: Path, flags, message) -> None:
    result = command(tmp_path, "run", *flags, "--output-dir", "runs/m")
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("bouquet-eval: ") and message in line


def test_workflow_flags_reach_snakemake(tmp_path: Path) -> None:
    flags = [*VLLM, "--shard", "1/4", "-n", "--profile", "slurm", "--cores", "3"]
    arguments = cli.build_parser("run").parse_args(
        [*flags, "--jobs", "9", "--keep-going", "--output-dir", "m"]
    )
    line = snakemake_arguments(
        "run", arguments, tmp_path, tmp_path / "c.yaml", ["--rerun-incomplete"]
    )
    assert line[line.index("--cores") + 1] == "3" and line[line.index("--jobs") + 1] == "9"
    assert "--keep-going" in line and "--dry-run" in line and "--rerun-incomplete" in line
    assert line[line.index("--profile") + 1] == str(REPOSITORY / "profiles" / "slurm")
    # Targets before --configfile, the shard last; a shard does not aggregate.
    assert line.index("scores") < line.index("--configfile")
    assert line[-2:] == ["--config", "directions={shard: 1/4}"] and "aggregates" not in line


def test_configuration_files_given_to_snakemake_go_with_the_saved_one(tmp_path: Path) -> None:
    """Snakemake keeps the last --configfile: one given after `--` is kept, before the saved
    configuration, and appears once."""
    extra = tmp_path / "resources.yaml"
    extra.write_text("resources: {score: {mem_mb: 1000}}\n", encoding="utf-8")
    arguments = cli.build_parser("run").parse_args([*VLLM, "--output-dir", "m"])
    line = snakemake_arguments(
        "run", arguments, tmp_path, tmp_path / "c.yaml", ["--configfile", str(extra), "-p"]
    )
    at_files = line.index("--configfile")
    assert line.count("--configfile") == 1 and "-p" in line[:at_files]
    assert line[at_files + 1 : at_files + 3] == [str(extra), str(tmp_path / "c.yaml")]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("models:\n  - name: a\n   translator: vllm\n", ", line 3, column 4: not valid YAML"),
        ("dataset: {path: x\n", ", line 2, column 1: not valid YAML"),
        ("- a\n- b\n", ": holds a list, not the mapping of settings"),
    ],
)
@pytest.mark.parametrize("given", ["saved", "after --"])
def test_a_broken_configuration_file_is_named_with_line_and_column(
    tmp_path: Path, text: str, where: str, given: str
) -> None:
    folder = tmp_path / "runs" / "m"
    folder.mkdir(parents=True)
    broken = folder / SAVED_CONFIG if given == "saved" else tmp_path / "mine.yaml"
    broken.write_text(text, encoding="utf-8")
    extra = [] if given == "saved" else ["--", "--configfile", "mine.yaml"]
    result = command(tmp_path, "run", *VLLM, "--output-dir", "runs/m", *extra)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    shown = broken if given == "saved" else Path("mine.yaml")
    assert line.startswith(f"bouquet-eval: {shown}{where}"), line


def test_the_console_script_is_the_command_line_main() -> None:
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    module, _, name = project["project"]["scripts"]["bouquet-eval"].partition(":")
    assert getattr(import_module(module), name) is cli.main


def test_help_documents_every_flag_with_its_default() -> None:
    for name in cli.WORKFLOW_SUBCOMMANDS:
        text = " ".join(cli.build_parser(name).format_help().split())
        for flag in ("--output-dir", "--dry-run", "--profile", "--cores", "--jobs"):
            assert flag in text
    text = " ".join(cli.top_level_help().split())
    for flag, key in cli.FLAG_KEYS.items():
        assert flag in text and f"configuration: {key}" in text
    for default in ("vllm", "chrf,metricx,glotlid", "0.9", "OPENAI_API_KEY", "16", "main", "all"):
        assert f"default: {default}" in text


def test_the_docs_map_every_flag_to_its_key() -> None:
    guide = (REPOSITORY / "docs" / "command-line.md").read_text(encoding="utf-8")
    keys = (REPOSITORY / "config" / "README.md").read_text(encoding="utf-8")
    for flag in cli.FLAG_KEYS:
        assert f"`{flag}" in guide and f"`{flag}" in keys, flag


# Real runs: `python -m bouquet_eval` in a subprocess, as `bouquet-eval` runs.


def command(
    cwd: Path,
    *arguments: str,
    check: bool = False,
    script: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`python -m bouquet_eval`; with `script`, without the working directory on sys.path, as
    the `bouquet-eval` console script runs."""
    result = subprocess.run(
        [sys.executable, *(["-P"] if script else []), "-m", "bouquet_eval", *arguments],
        cwd=cwd,
        env=Workflow.environment(env),
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"bouquet-eval failed:\n{result.stdout}\n{result.stderr}")
    return result


def recorded(record: Path) -> list[str]:
    """The directions the recording translator translated, in order (LOAD: a model load)."""
    return record.read_text(encoding="utf-8").split() if record.exists() else []


def recording(record: Path) -> tuple[str, ...]:
    return (
        "--translator", "recording:RecordingTranslator",
        "--translator-kwargs", f'{{"record": "{record}"}}',
        "--prompt-fn", "recording:make_tagged_prompt",
        "--prompt-kwargs", '{"prefix": "> "}',
    )  # fmt: skip


def test_run_with_a_translator_of_ones_own_and_resume(tmp_path: Path, dataset: Path) -> None:
    record = tmp_path / "record.txt"
    flags = (
        "run", *recording(record), "--src-lang", "eng_Latn", "--tgt-lang", "fra_Latn",
        "--directions", "eng_Latn-deu_Latn,eng_Latn-fra_Latn", "--limit", "3",
        "--metrics", "chrf", "--dataset-path", str(dataset), "--output-dir", "runs/mine/",
        "--cores", "2",
    )  # fmt: skip
    first = command(tmp_path, *flags, check=True)
    folder = tmp_path / "runs" / "mine"
    # --directions and --src-lang/--tgt-lang combine: only eng_Latn-fra_Latn.
    assert recorded(record) == ["LOAD", "eng_Latn-fra_Latn"]
    lines = first.stdout.splitlines()
    assert lines[0] == ("bouquet-eval: 1 direction, 1 model selected (3 sentences per model)"), (
        first.stdout
    )
    assert "bouquet-eval: translate 1/1 directions, score 1/1 directions, aggregate 1/1" in lines
    assert f"bouquet-eval: results in {folder}" in lines
    assert any(line.startswith("bouquet-eval: mine: chrfpp ") for line in lines), lines
    log = Path(lines[-1].removeprefix("bouquet-eval: Snakemake's full log: "))
    assert log.parent == folder / "logs" / "bouquet-eval" and "Job stats:" in log.read_text()
    assert len(lines) < 10 and not first.stderr
    translations = pd.read_json(folder / "eng_Latn-fra_Latn.jsonl", lines=True)
    assert translations["mt_text"].str.startswith("> ").all() and len(translations) == 3
    assert len(pd.read_csv(folder / "scores.csv")) == 1
    assert (folder / "scored_rows.parquet").is_file() and (folder / "manifest.json").is_file()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["entries"][-1]["command"][:3] == ["bouquet-eval", "run", "--translator"]

    # The configuration beside the outputs reproduces the run with plain Snakemake.
    saved = yaml.safe_load((folder / SAVED_CONFIG).read_text())
    assert saved["models"][0]["prompt_kwargs"] == {"prefix": "> "} and saved["limit"] == 3
    plain = Workflow(folder)
    plain.config_path = folder / SAVED_CONFIG
    assert "Nothing to be done" in plain.run("--dry-run", "aggregates").stdout


def test_the_same_command_again_does_only_what_is_missing(tmp_path: Path, dataset: Path) -> None:
    record, fault = tmp_path / "record.txt", tmp_path / "fault"
    kwargs = {"record": str(record), "fail_on_target": "fra_Latn", "fail_while_exists": str(fault)}
    flags = (
        "run", "--translator", "recording:RecordingTranslator",
        "--translator-kwargs", json.dumps(kwargs), "--prompt-fn", "recording:tagged_prompt",
        "--directions", "eng_Latn-deu_Latn,eng_Latn-fra_Latn", "--limit", "2",
        "--metrics", "chrf", "--dataset-path", str(dataset), "--output-dir", "runs/flaky",
        "--cores", "1",
    )  # fmt: skip
    fault.touch()
    failed = command(tmp_path, *flags)
    assert failed.returncode == 1
    assert "simulated failure on eng_Latn-fra_Latn" in failed.stderr
    # The failed job, named with its log, as the workflow's own error handler says it.
    assert re.search(
        r"^bouquet-eval: job translate_flaky_\S+ failed; its log: ", failed.stderr, re.M
    )
    assert "bouquet-eval: run failed; Snakemake's full log: " in failed.stderr
    assert recorded(record) == ["LOAD", "eng_Latn-deu_Latn"]
    fault.unlink()
    command(tmp_path, *flags, check=True)
    assert recorded(record) == ["LOAD", "eng_Latn-deu_Latn", "LOAD", "eng_Latn-fra_Latn"]
    again = command(tmp_path, *flags, check=True)
    assert len(recorded(record)) == 4
    assert "bouquet-eval: nothing to do: every output is current" in again.stdout.splitlines()


def test_translate_then_score_then_aggregate(tmp_path: Path, dataset: Path) -> None:
    flags = ("--dataset-path", str(dataset), "--output-dir", "runs/copy", "--cores", "2")
    command(
        tmp_path,
        "translate", "--translator", "bouquet_eval.translators.bounds:CopySource",
        "--src-lang", "eng_Latn", "--limit", "2", *flags,
        check=True,
    )  # fmt: skip
    folder = tmp_path / "runs" / "copy"
    assert sorted(path.stem for path in folder.glob("*.jsonl")) == ENGLISH_OUT
    assert not list(folder.glob("*.scored.parquet")) and not (folder / "scores.csv").exists()
    # score and aggregate take the translator and the selection from the saved configuration.
    command(tmp_path, "score", "--metrics", "chrf,bleu", *flags, check=True)
    scores = pd.read_csv(folder / "scores.csv")
    assert sorted(scores["src_lang"] + "-" + scores["tgt_lang"]) == ENGLISH_OUT
    assert {"chrfpp", "bleu"} <= set(scores.columns)
    (folder / "scores.csv").unlink()
    command(tmp_path, "aggregate", "--output-dir", "runs/copy", check=True)
    assert pd.read_csv(folder / "scores.csv").equals(scores)


def test_score_translations_brought_by_the_user(tmp_path: Path, dataset: Path) -> None:
    folder = tmp_path / "runs" / "mine"
    folder.mkdir(parents=True)
    for name in ("eng_Latn-fra_Latn", "eng_Latn-deu_Latn"):
        rows = pd.read_parquet(dataset / f"{name}.parquet").rename(columns={"tgt_text": "ref_text"})
        rows["mt_text"] = rows["ref_text"]  # perfect translations
        columns = ["src_lang", "tgt_lang", "src_text", "ref_text", "mt_text"]
        rows[columns].to_json(folder / f"{name}.jsonl", orient="records", lines=True)
    result = command(
        tmp_path, "score", "--output-dir", "runs/mine/", "--metrics", "chrf",
        "--dataset-path", str(dataset), "--cores", "2",
        check=True,
    )  # fmt: skip
    assert result.stdout.startswith("bouquet-eval: 2 directions, 1 model selected")
    scores = pd.read_csv(folder / "scores.csv")
    assert len(scores) == 2 and (scores["chrfpp"] == 100).all()
    assert yaml.safe_load((folder / SAVED_CONFIG).read_text())["models"][0] == {
        "name": "mine",
        "translator": "provided",
        "path": ".",
    }


def test_concurrent_shards_then_aggregate_equal_one_run(tmp_path: Path, dataset: Path) -> None:
    record = tmp_path / "record.txt"
    common = (*recording(record), "--all", "--limit", "2", "--metrics", "chrf",
              "--dataset-path", str(dataset), "--cores", "1")  # fmt: skip
    shards = [
        subprocess.Popen(
            [sys.executable, "-m", "bouquet_eval", "run", *common, "--shard", f"{i}/3",
             "--output-dir", "runs/sharded"],
            cwd=tmp_path, env=Workflow.environment(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )
        for i in range(3)
    ]  # fmt: skip
    outputs = [shard.communicate()[0] for shard in shards]
    assert [shard.returncode for shard in shards] == [0, 0, 0], outputs
    # Each shard handled directions [I::3] and wrote no aggregates.
    names = [d.name for d in SAMPLE_DIRECTIONS]
    for index, output in enumerate(outputs):
        assert f"shard {index}/3: {len(names[index::3])} directions of 20" in output
    # One model load per shard process, and every direction translated once.
    assert sorted(recorded(record)) == sorted(["LOAD"] * 3 + names)
    sharded = tmp_path / "runs" / "sharded"
    assert not (sharded / "scores.csv").exists()
    command(tmp_path, "aggregate", "--output-dir", "runs/sharded", check=True)
    assert len(recorded(record)) == 3 + len(names)  # aggregate translated nothing again
    command(tmp_path, "run", *common, "--output-dir", "runs/whole", check=True)
    whole = pd.read_csv(tmp_path / "runs" / "whole" / "scores.csv")
    pd.testing.assert_frame_equal(pd.read_csv(sharded / "scores.csv"), whole)


def test_dry_run_prints_the_configuration_and_writes_none(tmp_path: Path, dataset: Path) -> None:
    result = command(
        tmp_path, "run", *VLLM, "--shard", "0/2", "--dataset-path", str(dataset),
        "--output-dir", "runs/llama", "-n",
        check=True,
    )  # fmt: skip
    out = result.stdout
    shown = out.split("\nbouquet-eval: the same with Snakemake: ")[0].split("\n", 1)[1]
    assert yaml.safe_load(shown)["models"][0]["model"] == "org/model"
    assert "--config 'directions={shard: 0/2}'" in out
    assert "bouquet-eval: shard 0/2: 10 directions of 20, 1 model selected" in result.stderr
    assert "translate_llama_part0of2_shard0of1" in out
    assert not (tmp_path / "runs" / "llama" / SAVED_CONFIG).exists()


def test_a_dry_run_of_the_benchmark_is_short(tmp_path: Path, workflow: Workflow) -> None:
    """Plain Snakemake with the workflow's profile: 1062 directions and 3 models, in the jobs
    the default `shards: auto` makes of them on the run's two cores."""
    data = tmp_path / "synthetic"
    write_dataset(data, synthetic_directions(1062))
    workflow.write_config(
        {
            "dataset": {"path": str(data)},
            "models": [
                {"name": "copy-source", "translator": "copy-source"},
                {"name": "reference", "translator": "reference"},
                {"name": "llama", "translator": "vllm", "model": "org/model"},
            ],
        }
    )
    result = workflow.run("--dry-run")
    lines = (result.stderr + result.stdout).splitlines()
    assert len(lines) < 200 and max(map(len, lines)) < 2000, len(lines)
    own = [line for line in result.stderr.splitlines() if "workflow specific profile" not in line]
    assert own[0] == "bouquet-eval: 1062 directions, 3 models selected (2,124 sentences per model)"
    # A CPU model's translate and chrF++ jobs take a core each: two of each on two cores.
    # vLLM's jobs (4 CPUs and a GPU Snakemake is not told of) are as many as one at a time
    # can be; its score jobs follow its translate jobs.
    jobs = dict(re.findall(r"^    (\w+): (\d+) jobs?, threads", result.stdout, re.MULTILINE))
    assert {rule: int(count) for rule, count in jobs.items() if "_" in rule} == {
        "translate_copy_source": 2,
        "translate_reference": 2,
        "translate_llama": 1,
        "score_workflow_cpu_copy_source": 2,
        "score_workflow_cpu_reference": 2,
        "score_workflow_cpu_llama": 1,
    }, result.stdout


def test_parts_of_a_selection_are_disjoint_and_cover_it() -> None:
    directions = synthetic_directions(23)
    parts = [take_part(reversed(directions), f"{index}/4") for index in range(4)]
    assert sorted(d for part in parts for d in part) == sorted(directions)
    assert [len(part) for part in parts] == [6, 6, 6, 5]
    named = [name for part in range(4) for name in assign_shards(parts[part], 1, f"{part}/4")]
    assert named == [f"part{index}of4_shard0of1" for index in range(4)]
    for wrong in ("4/4", "1", "a/b", "-1/3"):
        with pytest.raises(ConfigError, match="expected I/N"):
            take_part(directions, wrong)


def test_a_translator_beside_the_command_and_the_time_left(tmp_path: Path, dataset: Path) -> None:
    """A module in the directory the command starts from is found, as `python -m` finds it; a
    slow translation shows the time left (its pace is known from the second direction on, and
    the console prints a moved count at most every 5 s: twenty seconds in all leave it room
    on a busy machine)."""
    (tmp_path / "slow_translators.py").write_text(
        "import time\n\n\n"
        "class Slow:\n"
        "    def translate(self, prompts):\n"
        "        time.sleep(5)\n"
        "        return [prompt.upper() for prompt in prompts]\n",
        encoding="utf-8",
    )
    result = command(
        tmp_path, "translate", "--translator", "slow_translators:Slow",
        "--src-lang", "eng_Latn", "--tgt-lang", "deu_Latn", "--tgt-lang", "fra_Latn",
        "--tgt-lang", "spa_Latn", "--tgt-lang", "rus_Cyrl", "--limit", "1",
        "--dataset-path", str(dataset), "--output-dir", "runs/slow", "--cores", "1",
        check=True, script=True,
    )  # fmt: skip
    assert len(list((tmp_path / "runs" / "slow").glob("*.jsonl"))) == 4
    estimates = [line for line in result.stdout.splitlines() if " left)" in line]
    assert estimates and all(line.startswith("bouquet-eval: translate ") for line in estimates)
    assert "translate 4/4 directions" in result.stdout and "score" not in result.stdout


def test_an_error_found_while_planning_is_shown_with_the_log(tmp_path: Path, dataset: Path) -> None:
    result = command(
        tmp_path, "run", "--model", "m", "--src-lang", "xyz_Latn", "--metrics", "chrf",
        "--dataset-path", str(dataset), "--output-dir", "runs/bad",
    )  # fmt: skip
    assert result.returncode == 1 and not result.stdout
    error, where = result.stderr.splitlines()
    assert error == (
        f"bouquet-eval: {tmp_path / 'runs' / 'bad' / 'bouquet-eval.yaml'}: src_filter "
        "(directions.src_langs): no direction of the dataset has language code(s) ['xyz_Latn']"
    )
    log = Path(where.removeprefix("bouquet-eval: run failed; Snakemake's full log: "))
    # The full log holds the same one line, without a traceback.
    assert error in log.read_text() and "Traceback" not in log.read_text()


def test_metrics_without_their_environments_are_named_before_any_job(tmp_path: Path) -> None:
    """COMET and BLASER asked for on the command line, in a Python that has neither: each
    environment's line names the flag to add, and no job starts (the workflow's environment
    holds neither unbabel-comet nor sonar-space)."""
    result = command(
        tmp_path, "run", "--translator", "copy-source", "--all", "--metrics",
        "chrf,comet,blaser", "--dataset-path", str(SAMPLE), "--output-dir", "runs/mine",
    )  # fmt: skip
    assert result.returncode == 1
    said = [line for line in result.stderr.splitlines() if "software environment" in line]
    assert [re.sub(r"\(/\S+\)", "(PYTHON)", line) for line in said] == [
        "bouquet-eval: metric comet scores in the software environment 'comet' "
        "(envs/comet.yaml), and this Python (PYTHON) has no module comet: give that "
        "environment's Python with --environment comet=PYTHON (docs/metrics.md#score-jobs), "
        "or run with --sdm conda",
        "bouquet-eval: metric blaser scores in the software environment 'blaser' "
        "(envs/blaser.yaml), and this Python (PYTHON) has no module sonar, fairseq2: give that "
        "environment's Python with --environment blaser=PYTHON (docs/metrics.md#score-jobs), "
        "or run with --sdm conda. No job was started.",
    ]
    assert not list((tmp_path / "runs" / "mine").glob("*.jsonl"))


def test_a_secret_in_the_flags_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    secret = "sk-flag-secret-0001"
    kwargs = f'{{"record": "r.txt", "api_key": "{secret}"}}'
    own = ("run", "--translator", "recording:RecordingTranslator", "--translator-kwargs", kwargs)
    for dry_run in ((), ("--dry-run",)):
        result = command(tmp_path, *own, "--all", *dry_run, "--output-dir", "runs/mine")
        assert result.returncode == 1 and not result.stdout
        assert result.stderr.startswith(
            "bouquet-eval: models[0].translator_kwargs.api_key holds a value under a secret "
            "name: the configuration never holds a secret"
        ), result.stderr
        assert secret not in result.stderr and len(result.stderr.splitlines()) == 1
    # The value of the variable that the model's api_key_env names, in another flag.
    result = command(
        tmp_path, "translate", "--backend", "openai", "--model", "m", "--api-key-env", "MY_KEY",
        "--system-prompt", f"Never say {secret}.", "--all", "--output-dir", "runs/mine",
        env={"MY_KEY": secret},
    )  # fmt: skip
    assert result.stderr.startswith(
        "bouquet-eval: models[0].system_prompt holds the value of the secret variable MY_KEY: "
    ), result.stderr
    assert not (tmp_path / "runs").exists()
    # A configuration saved by an earlier command is named.
    saved = tmp_path / "runs" / "mine" / SAVED_CONFIG
    saved.parent.mkdir(parents=True)
    earlier = {"name": "mine", "translator": "x:Y", "translator_kwargs": {"password": "p"}}
    saved.write_text(yaml.safe_dump({"models": [earlier]}))
    result = command(tmp_path, "score", "--all", "--output-dir", "runs/mine")
    assert result.stderr.startswith(
        f"bouquet-eval: {saved}: models[0].translator_kwargs.password holds a value under"
    ), result.stderr


def test_translate_through_an_openai_compatible_endpoint(tmp_path: Path, dataset: Path) -> None:
    """The original quick start, against a local server that speaks the protocol."""
    with ChatServer() as server:
        command(
            tmp_path, "translate", "--backend", "openai", "--model", "gpt-4o-mini",
            "--base-url", server.url, "--api-key-env", "MY_KEY", "--concurrency", "2",
            "--system-prompt", "Be exact.", "--temperature", "0.2", "--seed", "5",
            "--src-lang", "eng_Latn", "--tgt-lang", "fra_Latn", "--limit", "2",
            "--dataset-path", str(dataset), "--output-dir", "runs/gpt-4o-mini/",
            check=True, env={"MY_KEY": "key-123"},
        )  # fmt: skip
        requests = server.chat_requests
    assert len(requests) == 2
    for request in requests:
        assert request.body["model"] == "gpt-4o-mini" and request.body["seed"] == 5
        assert request.body["temperature"] == 0.2
        assert request.body["messages"][0] == {"role": "system", "content": "Be exact."}
        assert request.headers["authorization"] == "Bearer key-123"
    translations = pd.read_json(
        tmp_path / "runs" / "gpt-4o-mini" / "eng_Latn-fra_Latn.jsonl", lines=True
    )
    assert len(translations) == 2


def test_a_folder_name_that_cannot_name_a_model_is_refused(tmp_path: Path) -> None:
    result = command(tmp_path, "run", *VLLM, "--output-dir", "runs/my model")
    assert result.returncode == 1
    assert result.stderr.startswith("bouquet-eval: --output-dir 'runs/my model': the folder's")


def saved_runs(runs: Path, first: dict, second: dict) -> None:
    """Two models' runs into `runs`, each with the configuration the command saves."""
    for config, name in ((first, "first"), (second, "second")):
        folder = runs / name
        folder.mkdir(parents=True)
        entry = {"name": name, "translator": "copy-source"}
        (folder / SAVED_CONFIG).write_text(
            yaml.safe_dump({**config, "output_dir": "..", "models": [entry]}), encoding="utf-8"
        )


def run_settings(files: Path) -> dict:
    """A run's settings besides its model: every metric family, its own metric settings."""
    from .test_channel import finished_config

    config = finished_config(files)
    for key in ("models", "prices"):
        config.pop(key)
    return config


def merge_cases() -> tuple[list[str], list[str]]:
    """The run-wide settings the leaderboard's jobs read (every metric's among them), and
    those they do not, from the schema's declarations."""
    from bouquet_eval.planning.channel import LEADERBOARD_READS, MODEL_KEYED

    from .test_channel import SETTINGS

    shared: list[str] = []
    apart: list[str] = []
    for setting in SETTINGS:
        if setting.path[0] in ("models", *MODEL_KEYED):
            continue  # a model's own
        read = set(setting.changes or ()) & set(LEADERBOARD_READS)
        (shared if read else apart).append(setting.name)
    return shared, apart


SHARED, APART = merge_cases()
OWN_MODELS = {"compare.baseline": "second", "compare.models": ["second"]}
"""What these settings take in a run of the model `second` alone."""


def runs_differing_in(name: str, folder: Path) -> tuple[tuple, object]:
    """Two runs saved into `folder / "runs"` whose settings differ in the setting `name` alone;
    where it is, and the second run's value."""
    from .test_channel import SETTINGS, changed_value, set_at, value_at, where_of

    setting = next(s for s in SETTINGS if s.name == name)
    first = run_settings(folder)
    second = json.loads(json.dumps(first))
    where = where_of(setting, second)
    if name in OWN_MODELS:
        value = OWN_MODELS[name]
    else:
        value = changed_value(setting, value_at(second, where), folder)
    set_at(second, where, value)
    saved_runs(folder / "runs", first, second)
    return where, value


@pytest.mark.parametrize("name", SHARED)
def test_runs_that_differ_in_what_the_leaderboard_reads_are_refused(
    tmp_path: Path, name: str
) -> None:
    from bouquet_eval.command.config import runs_config

    where, value = runs_differing_in(name, tmp_path)
    runs = tmp_path / "runs"
    with pytest.raises(ConfigError) as refused:
        runs_config(runs)
    message = str(refused.value)
    key = ".".join(map(str, where))
    assert message.startswith(f"{runs / 'second'} and {runs / 'first'} differ in {key}: "), message
    assert json.dumps(value) in message, message
    assert f"in {runs / 'first' / SAVED_CONFIG}" in message


@pytest.mark.parametrize("name", APART)
def test_runs_that_differ_only_in_what_the_leaderboard_does_not_read_merge(
    tmp_path: Path, name: str
) -> None:
    from bouquet_eval.command.config import runs_config

    runs_differing_in(name, tmp_path)
    merged = runs_config(tmp_path / "runs")
    assert [entry["name"] for entry in merged["models"]] == ["first", "second"]
    assert merged["output_dir"] == "."


def test_merged_runs_keep_each_models_prices(tmp_path: Path) -> None:
    from bouquet_eval.command.config import runs_config

    first = {"metrics": ["chrf"], "prices": {"first": {"input": 1.0, "output": 2.0}}}
    second = {"metrics": ["chrf"], "prices": {"second": {"input": 3.0, "output": 4.0}}}
    saved_runs(tmp_path / "runs", first, second)
    assert runs_config(tmp_path / "runs")["prices"] == {
        "first": {"input": 1.0, "output": 2.0},
        "second": {"input": 3.0, "output": 4.0},
    }
