"""What is wrong in a configuration stops the run while planning, in one line naming the file
and the key, before any job starts: translators and prompt functions of one's own, API keys."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from .conftest import PLUGINS, Workflow, python_path
from .workflow_configs import bounds_config

# Objects of one's own, in a module of the user's (on PYTHONPATH).
OWN_MODULE = textwrap.dedent(
    '''
    class Echo:
        def __init__(self, prefix, temperature=0.0):
            self.prefix = prefix

        def translate(self, prompts):
            return [self.prefix + p for p in prompts]


    class Open(Echo):
        """Takes whatever it is given."""

        def __init__(self, **options):
            super().__init__(options.get("prefix", ""))


    def short_prompt(src_lang, tgt_lang, src_text):
        return src_text


    def two_arguments(src_lang, src_text):
        return src_text


    def prompt_factory(style):
        return short_prompt
    '''
)


@pytest.fixture
def own_module(tmp_path: Path) -> dict[str, str]:
    # Not named `own`: a folder of that name in the runs' working folder would be a namespace
    # package of that name to `python -m snakemake`.
    folder = tmp_path / "own-code"
    folder.mkdir()
    (folder / "own.py").write_text(OWN_MODULE, encoding="utf-8")
    return {"PYTHONPATH": python_path(PLUGINS, folder)}


def own_model(**entry: object) -> dict:
    return {"name": "mine", "translator": "own:Echo", "translator_kwargs": {"prefix": ">"}, **entry}


def planning_failure(workflow: Workflow, env: dict[str, str], *arguments: str) -> str:
    """The last line of a run that must stop at planning, having started nothing."""
    result = workflow.run(*arguments, check=False, env=env)
    assert result.returncode != 0, result.stdout
    text = result.stdout + result.stderr
    assert "Traceback" not in text and "WorkflowError" not in text, text
    assert not (workflow.workdir / "runs").exists() and not (workflow.workdir / "logs").exists()
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"translator_kwargs": {"prefix": ">", "temprature": 0.5}},
            "models[2].translator_kwargs.temprature (model 'mine'): 'own:Echo' takes no argument "
            "'temprature' (its arguments: prefix, temperature)",
        ),
        (
            {"translator_kwargs": {"temperature": 0.5}},
            "models[2].translator_kwargs (model 'mine'): 'own:Echo' cannot be called with these "
            "arguments: missing a required argument: 'prefix'",
        ),
        (
            {"translator": "own:Echoo"},
            "models[2].translator (model 'mine'): module 'own' has no attribute 'Echoo'",
        ),
        (
            {"translator": "owne:Echo"},
            "models[2].translator (model 'mine'): cannot import module 'owne' of 'owne:Echo'",
        ),
        (
            {"prompt_fn": "own:two_arguments"},
            "models[2].prompt_fn (model 'mine'): 'own:two_arguments' cannot be called "
            "(src_lang, tgt_lang, src_text): too many positional arguments",
        ),
        (
            {"prompt_fn": "own:prompt_factory", "prompt_kwargs": {"stlye": "x"}},
            "models[2].prompt_kwargs.stlye (model 'mine'): 'own:prompt_factory' takes no "
            "argument 'stlye' (its arguments: style)",
        ),
    ],
)
def test_objects_of_ones_own_are_checked_before_any_job(
    workflow: Workflow, dataset: Path, own_module: dict[str, str], entry: dict, message: str
) -> None:
    """A dry run warns; a real run that is to translate with the model stops before any job
    starts."""
    config = bounds_config(dataset)
    config["models"].append(own_model(**entry))
    workflow.write_config(config)
    dry = workflow.run("--dry-run", env=own_module)
    assert f"bouquet-eval: warning: {workflow.config_path}: {message}" in dry.stderr, dry.stderr
    assert "a real run that translates with this model stops before any job starts" in dry.stderr
    result = workflow.run(check=False, env=own_module)
    assert result.returncode != 0
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"bouquet-eval: {workflow.config_path}: {message}"), line
    assert "Traceback" not in result.stderr and not (workflow.workdir / "logs").exists()
    assert not list((workflow.workdir / "runs").glob("*/*.jsonl"))


def test_objects_of_ones_own_are_imported_only_where_they_translate(
    workflow: Workflow, dataset: Path, own_module: dict[str, str], tmp_path: Path
) -> None:
    """Runs made elsewhere, ranked from a folder where their translator cannot be imported:
    nothing of theirs is translated, so nothing of theirs is imported; `python_path`, where
    given, finds it for the directions to redo."""
    config = bounds_config(dataset, directions={"list": ["eng_Latn-deu_Latn"]}, limit=2)
    config["models"] = [own_model()]
    workflow.write_config(config)
    workflow.run(env=own_module)
    elsewhere = {"PYTHONPATH": python_path(PLUGINS)}  # without the folder of `own`
    (workflow.workdir / "runs" / "leaderboard.csv").unlink()
    workflow.run("results", env=elsewhere)
    assert (workflow.workdir / "runs" / "leaderboard.csv").is_file()
    (workflow.workdir / "runs" / "mine" / "eng_Latn-deu_Latn.jsonl").unlink()
    line = planning_failure_line(workflow.run("results", check=False, env=elsewhere))
    assert "models[0].translator (model 'mine'): cannot import module 'own' of 'own:Echo': " in line
    assert line.endswith("(the folder that holds it goes in python_path, or on PYTHONPATH)")
    config["python_path"] = [str(tmp_path / "own-code")]
    workflow.write_config(config)
    workflow.run("results", env=elsewhere)
    assert (workflow.workdir / "runs" / "mine" / "eng_Latn-deu_Latn.jsonl").is_file()


def planning_failure_line(result) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_what_can_be_called_so_passes(
    workflow: Workflow, dataset: Path, own_module: dict[str, str]
) -> None:
    config = bounds_config(dataset, directions={"list": ["eng_Latn-deu_Latn"]})
    config["models"] = [
        own_model(prompt_fn="own:short_prompt"),
        # A constructor that takes **options is taken as it is.
        own_model(name="open", translator="own:Open", translator_kwargs={"anything": 1}),
        own_model(name="made", prompt_fn="own:prompt_factory", prompt_kwargs={"style": "x"}),
    ]
    workflow.write_config(config)
    workflow.run(env=own_module)
    assert (workflow.workdir / "runs" / "open" / "eng_Latn-deu_Latn.jsonl").is_file()


def test_the_file_that_set_the_key_is_named(
    workflow: Workflow, dataset: Path, own_module: dict[str, str]
) -> None:
    base, override = workflow.workdir / "base.yaml", workflow.workdir / "override.yaml"
    base.write_text(yaml.safe_dump(bounds_config(dataset)), encoding="utf-8")
    override.write_text(yaml.safe_dump({"limit": "ten", "shards": 2}), encoding="utf-8")
    line = planning_failure(workflow, own_module, "--configfile", str(base), str(override))
    assert line.startswith(f"bouquet-eval: {override}: invalid configuration at 'limit'"), line


UNSET = "BOUQUET_EVAL_TEST_KEY_THAT_IS_NOT_SET"


def api_model() -> dict:
    return {
        "name": "api",
        "translator": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": UNSET,
    }


def test_an_unset_api_key_warns_in_a_dry_run_and_stops_a_real_one(
    workflow: Workflow, dataset: Path
) -> None:
    config = bounds_config(dataset, directions={"list": ["eng_Latn-deu_Latn"]})
    config["models"].append(api_model())
    workflow.write_config(config)
    dry = workflow.run("--dry-run", env={UNSET: ""})
    assert (
        f"bouquet-eval: warning: models[2].api_key_env (model 'api'): the environment variable "
        f"{UNSET} is not set"
    ) in dry.stderr

    result = workflow.run(check=False, env={UNSET: ""})
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        f"bouquet-eval: {workflow.config_path}: models[2].api_key_env (model 'api'): the "
        f"environment variable {UNSET} is not set or is empty; set it to the API key, or set "
        "api_key_env to null for a server that needs no key. No job was started."
    )
    assert "Traceback" not in result.stderr
    # The plan's records are written, but no job ran.
    assert not (workflow.workdir / "logs").exists()
    assert not list((workflow.workdir / "runs").glob("*/*.jsonl"))

    # A run that has nothing to translate with that model does not need its key.
    config["models"].pop()
    workflow.write_config(config)
    workflow.run(env={UNSET: ""})
    config["models"].append(api_model())
    workflow.write_config(config)
    workflow.run("runs/copy-source/scores.csv", env={UNSET: ""})
