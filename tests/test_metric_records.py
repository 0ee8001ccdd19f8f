"""One record per metric: what follows from it, and score jobs split by what they need."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd
import pytest

from bouquet_eval.core.config import ConfigError, import_object, load_yaml
from bouquet_eval.data.dataset import Direction, dataset_source
from bouquet_eval.data.outputs import metric_scores_path, score_settings
from bouquet_eval.data.translations import read_translations
from bouquet_eval.metrics import Metric, load_metric, load_metrics, records
from bouquet_eval.metrics.records import (
    RECORDS,
    MetricRecord,
    MetricSet,
    record_of,
)
from bouquet_eval.metrics.training_languages import MT5_LANGUAGES, XLMR_LANGUAGES
from bouquet_eval.planning.schema import load_schema, validate_config
from bouquet_eval.results.aggregate import UNSEEN, with_unseen
from bouquet_eval.results.leaderboard import unseen_counts, unseen_notes
from bouquet_eval.scoring.score import gather_scores, score_metrics, scored_table

from .conftest import PLUGINS, REPOSITORY, SAMPLE, Workflow
from .synthetic import synthetic_directions, write_dataset
from .tiny_fasttext import build_tiny_model
from .workflow_configs import bounds_config

DEFAULTS: dict[str, dict[str, Any]] = {"metricx": {"model": "google/metricx-24-hybrid-xl-v2p6",
                        "tokenizer": "google/mt5-xl", "qe": False, "device": "auto"},
            "glotlid": {"model": "cis-lmu/glotlid/model_v3.bin", "revision": None}}  # fmt: skip


@pytest.mark.parametrize("name", list(RECORDS))
def test_each_record_matches_its_class(name: str) -> None:
    """Columns and signature fields as the metric itself has them (no model is loaded)."""
    record = RECORDS[name]
    metric = load_metric(name, {k: v for k, v in DEFAULTS.get(name, {}).items() if k != "device"})
    assert metric.name == name
    assert tuple(metric.columns) == record.columns
    fields = {
        part.split(":", 1)[0]
        for half in metric.signature().removeprefix("sentence ").split("; corpus ")
        for part in half.split("|")
    }
    assert fields == set(record.signature_fields)


SCHEMA = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"


@pytest.mark.parametrize("name", [name for name, r in RECORDS.items() if r.settings is not None])
def test_each_settings_section_is_its_records_and_its_classs(name: str) -> None:
    """The configuration schema's section of a metric is its record's, which names every
    parameter of its class with the class's default (a COMET class's model defaults to its
    `default_model`, BLASER's checkpoint its `default_checkpoint`); the schema's file writes
    none of them."""
    record = RECORDS[name]
    written = load_yaml(SCHEMA)["properties"]
    assert name not in written
    assert load_schema(SCHEMA)["properties"][name] == record.settings_schema()
    settings = dict(record.settings or {})
    factory = import_object(record.factory)
    parameters = inspect.signature(factory).parameters
    assert set(parameters) == set(settings)
    for key, parameter in parameters.items():
        default = parameter.default
        if default is None:
            default = getattr(factory, f"default_{key}", None)
        assert settings[key]["default"] == default, key


def test_a_new_metric_is_its_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record alone gives the configuration its name and its section: defaults filled in
    after `metrics`, a wrong value named by its key."""
    toy = MetricRecord(
        "toy",
        "toys:Toy",
        "a toy",
        ("toy",),
        settings={"size": {"type": "integer", "minimum": 1, "default": 3}},
    )
    monkeypatch.setattr(records, "RECORDS", MappingProxyType({**RECORDS, "toy": toy}))
    minimal = {"models": [{"name": "m", "translator": "reference"}]}
    config = validate_config({**minimal, "metrics": ["chrf", "toy"]}, SCHEMA)
    assert config["toy"] == {"size": 3}
    sections = list(load_schema(SCHEMA)["properties"])
    assert sections.index("toy") > sections.index("metrics")
    with pytest.raises(ConfigError, match=r"at 'toy.size': 0 is less than the minimum of 1"):
        validate_config({**minimal, "metrics": ["toy"], "toy": {"size": 0}}, SCHEMA)
    with pytest.raises(ConfigError, match=r"at 'toy': Additional properties"):
        validate_config({**minimal, "metrics": ["toy"], "toy": {"colour": "red"}}, SCHEMA)


def test_families_follow_environment_and_device() -> None:
    config = {**DEFAULTS}
    metrics = MetricSet.of(["chrf", "glotlid", "metricx", "bleu"], config)
    assert metrics.families() == {
        "workflow_cpu": ("chrf", "bleu"),
        "metrics_cpu": ("glotlid",),
        "metrics_gpu": ("metricx",),
    }
    assert [metrics.family_gpus(f) for f in metrics.families()] == [0, 0, 1]
    assert [metrics.family_cpus(f) for f in metrics.families()] == [1, 1, 2]
    on_cpu = MetricSet.of(["chrf", "glotlid", "metricx"], {**config, "metricx": {"device": "cpu"}})
    assert on_cpu.families() == {"workflow_cpu": ("chrf",), "metrics_cpu": ("glotlid", "metricx")}
    assert on_cpu.family_cpus("metrics_cpu") == 4


@pytest.mark.parametrize(
    ("metrics", "environment"),
    [
        (["chrf", "bleu"], "workflow"),
        (["chrf", "glotlid"], "metrics"),
        (["chrf", "comet"], "comet"),
        (["comet", "chrf", "metricx"], "comet"),
    ],
)
def test_verification_runs_where_the_metrics_own_environment_is(
    metrics: list[str], environment: str
) -> None:
    """One job computes every metric (`verify`): in COMET's environment when a COMET metric
    is among them, wherever it stands in `metrics`."""
    assert MetricSet.of(metrics, DEFAULTS).joint_environment() == environment


def test_own_metric_declares_its_facts_or_gets_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    (flaky,) = load_metrics(["faults:FlakyMetric"], {})
    record = record_of("faults:FlakyMetric", flaky)
    assert (record.columns, record.environment, record.gpus({}), record.job_cpus({})) == (
        ("length",),
        "workflow",
        0,
        2,
    )
    assert record.training_languages is None and record.tolerances == {}


def test_prefetch_and_manifest_read_the_records() -> None:
    needs = {
        n.needed_by: n for n in MetricSet.of(["chrf", "metricx", "glotlid"], DEFAULTS).hub_needs()
    }
    assert set(needs) == {"metricx.model", "metricx.tokenizer", "glotlid.model"}
    assert needs["metricx.tokenizer"].parts == ("tokenizer",)
    assert (needs["glotlid.model"].repo_id, needs["glotlid.model"].filename) == (
        "cis-lmu/glotlid",
        "model_v3.bin",
    )


def test_reference_free_and_unseen_languages() -> None:
    metrics = MetricSet.of(["chrf", "metricx", "glotlid"], DEFAULTS)
    assert metrics.reference_free_columns() == {"glotlid_pred", "glotlid_score"}
    qe = MetricSet.of(["metricx", "glotlid"], {**DEFAULTS, "metricx": {"qe": True}})
    assert "glotlid_x_metricx" in qe.reference_free_columns()
    # mT5 saw Standard Arabic, not Egyptian; the source counts only without a reference.
    assert metrics.uncovered("arz_Arab", "arb_Arab") == []
    assert metrics.uncovered("eng_Latn", "arz_Arab") == ["metricx"]
    assert qe.uncovered("arz_Arab", "eng_Latn") == ["metricx"]
    # Per score column (meta-evaluation's split): the composite follows MetricX's model.
    assert metrics.trained_columns("arz_Arab", "arb_Arab") == {
        "metricx": True,
        "glotlid_x_metricx": True,
    }
    assert qe.trained_columns("arz_Arab", "eng_Latn") == {
        "metricx": False,
        "glotlid_x_metricx": False,
    }
    assert len(MT5_LANGUAGES) == 100 and len(XLMR_LANGUAGES) == 93
    assert XLMR_LANGUAGES.covers("cmn_Hant") and not XLMR_LANGUAGES.covers("yue_Hant")


SCORED_DIRECTION = Direction("eng_Latn", "fra_Latn")


def write_copy_source(folder: Path) -> Path:
    """The sample's source texts as the translations of SCORED_DIRECTION, in `folder`."""
    rows = dataset_source(SAMPLE).load(SCORED_DIRECTION)
    translations = rows.rename(columns={"tgt_text": "ref_text"}).assign(mt_text=rows["src_text"])
    translations = translations[["src_lang", "tgt_lang", "src_text", "ref_text", "mt_text"]]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{SCORED_DIRECTION}.jsonl"
    translations.assign(uniq_id=rows["uniq_id"]).to_json(
        path, orient="records", lines=True, force_ascii=False
    )
    return path


def test_gathered_scores_are_those_scored_in_one_pass(tmp_path: Path) -> None:
    """Metric by metric, then gathered: the same table, value for value and type for type."""
    direction, dataset = SCORED_DIRECTION, dataset_source(SAMPLE)
    write_copy_source(tmp_path)
    names = ["chrf", "bleu", "ter", "glotlid"]
    config = {"glotlid": {"model": str(build_tiny_model(tmp_path / "lid.bin"))}}
    metrics = load_metrics(names, config)
    score_metrics([direction], tmp_path, dict(zip(names, metrics, strict=True)), dataset, config)
    gather_scores([direction], tmp_path, dataset, score_settings(names, config))
    gathered = pd.read_parquet(tmp_path / f"{direction}.scored.parquet")
    read = read_translations(tmp_path / f"{direction}.jsonl", direction, dataset.load(direction))
    pd.testing.assert_frame_equal(gathered, scored_table(read, metrics).to_pandas())


def test_one_familys_job_writes_the_scored_file_a_gathering_job_would(tmp_path: Path) -> None:
    """Where the metrics are one family, their score job writes each scored file from what it
    has at hand: byte for byte the file that gathering them apart writes, with no cached copy."""
    direction, dataset = SCORED_DIRECTION, dataset_source(SAMPLE)
    names = ["chrf", "bleu", "ter"]
    assert MetricSet.of(names, {}).gathered_in_score_jobs()
    settings = score_settings(names, {})
    apart, together = tmp_path / "apart", tmp_path / "together"
    for folder in (apart, together):
        write_copy_source(folder)
    metrics = dict(zip(names, load_metrics(names, {}), strict=True))
    score_metrics([direction], apart, metrics, dataset, {})
    gather_scores([direction], apart, dataset, settings)
    score_metrics([direction], together, metrics, dataset, {}, scored_settings=settings)
    name = f"{direction}.scored.parquet"
    assert (together / name).read_bytes() == (apart / name).read_bytes()
    assert not list(together.glob(f".cache/*/{name}"))


def test_gathering_checks_translations_changed_since_they_were_scored(tmp_path: Path) -> None:
    """Gathering only parses translations that the score jobs checked, unchanged since; a file
    changed after them is checked line by line again."""
    direction, dataset = SCORED_DIRECTION, dataset_source(SAMPLE)
    path = write_copy_source(tmp_path)
    metrics = dict(zip(["chrf"], load_metrics(["chrf"], {}), strict=True))
    score_metrics([direction], tmp_path, metrics, dataset, {})
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = re.sub(r'"mt_text":"[^"]*"', '"mt_text":7', lines[2])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\.jsonl, line 3: mt_text is int, not a string"):
        gather_scores([direction], tmp_path, dataset, score_settings(["chrf"], {}))


class _FailsOnDirection:
    """A metric that scores as `inner` does, and fails on its `failing`-th direction."""

    def __init__(self, inner: Metric, failing: int) -> None:
        self.inner, self.failing, self.calls = inner, failing, 0
        self.name, self.columns = inner.name, inner.columns

    def signature(self) -> str:
        return str(self.inner.signature())

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[Any]]:
        self.calls += 1
        if self.calls == self.failing:
            raise RuntimeError("the metric failed")
        return self.inner.score(rows)


def test_directions_scored_before_a_failure_are_written(tmp_path: Path) -> None:
    """A score job writes its directions in batches; a direction that fails does not take the
    scores of the directions scored before it in its batch: they are written, and a rerun
    scores the failed direction alone."""
    dataset = dataset_source(SAMPLE)
    directions = sorted(dataset.directions())[:4]
    for direction in directions:
        rows = dataset.load(direction)
        translations = rows.rename(columns={"tgt_text": "ref_text"}).assign(
            mt_text=rows["src_text"]
        )
        translations.to_json(
            tmp_path / f"{direction}.jsonl", orient="records", lines=True, force_ascii=False
        )
    (chrf,) = load_metrics(["chrf"], {})
    failing = _FailsOnDirection(chrf, failing=3)
    with pytest.raises(RuntimeError, match="the metric failed"):
        score_metrics(directions, tmp_path, {"chrf": failing}, dataset, {})
    written = [metric_scores_path(tmp_path, "chrf", d).is_file() for d in directions]
    assert written == [True, True, False, False]
    rerun = _FailsOnDirection(chrf, failing=0)
    score_metrics(directions, tmp_path, {"chrf": rerun}, dataset, {})
    assert rerun.calls == 2 and all(
        metric_scores_path(tmp_path, "chrf", d).is_file() for d in directions
    )


def test_dry_run_at_benchmark_scale_splits_score_jobs(workflow: Workflow, tmp_path: Path) -> None:
    """1062 directions on the Slurm profile: CPU metrics' jobs hold no GPU, MetricX's and
    COMET's one each, in jobs of their own."""
    write_dataset(tmp_path / "data", synthetic_directions(1062), sentences=1)
    metrics = ["chrf", "glotlid", "metricx", "comet"]
    config = bounds_config(tmp_path / "data", shards=4, metrics=metrics)
    config["models"] = config["models"][:1]
    workflow.write_config(config)
    run = workflow.run(
        "-n", "--profile", str(REPOSITORY / "profiles" / "slurm"), "--quiet", "progress"
    )
    # The console's lines of what each rule's jobs ask for, shards together.
    console = re.sub(r"\n {8}", " ", run.stdout + run.stderr)  # lines the console wrapped
    asked = re.findall(r"^ +(\S+): (\d+) jobs?, (.*)$", console, re.MULTILINE)
    jobs = {rule: resources for rule, _, resources in asked}
    counts = {rule: int(count) for rule, count, _ in asked}
    families = {
        "score_workflow_cpu",
        "score_metrics_cpu",
        "score_metrics_gpu",
        "score_comet_gpu",
        "score",
    }
    assert {name.split("_copy_source")[0] for name in jobs} >= families
    assert counts["score_copy_source"] == 4  # gathering
    assert counts["score_metrics_gpu_copy_source"] == 4
    for name, resources in jobs.items():
        if name.startswith(("score_workflow_cpu", "score_metrics_cpu")):
            assert "gpu=0" in resources and "gpu=1" not in resources, (name, resources)
        if name.startswith(("score_metrics_gpu", "score_comet_gpu")):
            assert "gpu=1" in resources, (name, resources)


def planned_rules(workflow: Workflow) -> set[str]:
    """The rules a dry run plans, from its table of jobs (model and shard left out)."""
    run = workflow.run("-n", "--quiet", "progress")
    table = re.findall(r"^(\S+)\s+\d+$", run.stdout + run.stderr, flags=re.MULTILINE)
    return {re.sub(r"_copy_source_\S+$", "", job) for job in table} - {"total", "job"}


def test_adding_a_metric_runs_its_jobs_alone(workflow: Workflow, tmp_path: Path) -> None:
    """Adding GlotLID to a finished chrF++ run scores GlotLID only; removing it scores nothing.
    Either way the other metric's files are neither recomputed nor rewritten. chrF++'s
    environment is given a Python of its own, which its jobs hand their work to. Alone, chrF++
    is one family, whose jobs write the scored files themselves: no job gathers them."""
    lid = {"model": str(build_tiny_model(tmp_path / "lid.bin"))}
    base = bounds_config(SAMPLE, shards=1, directions={"list": ["eng_Latn-fra_Latn"]})
    base["models"] = base["models"][:1]
    base["environments"] = {"workflow": sys.executable}
    workflow.write_config({**base, "metrics": ["chrf"], "glotlid": lid})
    assert "score" not in planned_rules(workflow)
    workflow.run()
    log = workflow.workdir / "logs" / "copy-source" / "score" / "workflow_cpu" / "shard0of1.log"
    assert f"scoring chrf in {sys.executable}" in log.read_text()
    assert "eng_Latn-fra_Latn: chrf on 24 sentences" in log.read_text()
    folder = workflow.workdir / "runs" / "copy-source"
    chrf = folder / "by-metric" / "chrf" / "eng_Latn-fra_Latn.parquet"
    written = chrf.stat().st_mtime_ns
    inode = chrf.stat().st_ino

    workflow.write_config({**base, "metrics": ["chrf", "glotlid"], "glotlid": lid})
    planned = planned_rules(workflow)
    assert "score_metrics_cpu" in planned and "score" in planned
    assert not {"score_workflow_cpu", "translate"} & planned, planned
    workflow.run()
    scored = pd.read_parquet(folder / "eng_Latn-fra_Latn.scored.parquet")
    assert {"chrfpp", "glotlid_pred", "glotlid_score"} <= set(scored.columns)
    assert chrf.stat().st_mtime_ns == written

    # chrF++'s job writes the scored file again, from the columns it has.
    workflow.write_config({**base, "metrics": ["chrf"], "glotlid": lid})
    planned = planned_rules(workflow)
    assert "score_workflow_cpu" in planned
    assert not {"score", "score_metrics_cpu", "translate"} & planned, planned
    workflow.run()
    scored = pd.read_parquet(folder / "eng_Latn-fra_Latn.scored.parquet")
    assert "glotlid_score" not in scored.columns and "chrfpp" in scored.columns
    # Snakemake dates the outputs of a job that ran anew; the file is the one written first.
    assert chrf.stat().st_ino == inode
    assert "chrf on" not in log.read_text() and "24 sentences gathered" in log.read_text()


def test_directions_a_learned_metric_never_saw_are_flagged_and_counted(tmp_path: Path) -> None:
    scores = pd.DataFrame(
        {
            "src_lang": ["eng_Latn", "eng_Latn", "arz_Arab"],
            "tgt_lang": ["fra_Latn", "arz_Arab", "eng_Latn"],
            "n_sentences": [1, 1, 1],
        }
    )
    flagged = with_unseen(scores, MetricSet.of(["chrf", "metricx"], DEFAULTS))
    assert flagged[UNSEEN].tolist() == ["", "metricx", ""]
    # As the leaderboard reads scores.csv back (an empty cell is NaN there).
    flagged.to_csv(tmp_path / "scores.csv", index=False)
    assert unseen_counts(pd.read_csv(tmp_path / "scores.csv")) == {"metricx_unseen_directions": 1}
    board = pd.DataFrame([{"model": "m", "n_directions": 3, "metricx_unseen_directions": 1}])
    assert unseen_notes(board) == [
        "m: 1 of the 3 directions of its metricx means are in a language metricx's model was "
        "not trained on"
    ]
    assert UNSEEN not in with_unseen(scores, MetricSet.of(["chrf"], {}))
