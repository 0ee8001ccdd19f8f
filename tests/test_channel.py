"""One channel from the configuration into every job (bouquet_eval.planning.channel): on a
finished run, a setting changed alone reruns exactly the jobs whose outputs it can change, as
its declaration says, and what follows from their outputs; nothing else.

The cases are generated from the complete configuration schema: every leaf setting (each
backend's translator settings, each metric's section, statistics, metaeval, verify, ...) is
changed alone, removed where the run set it, and the schema is given new settings with their
defaults, as a release adds them. A setting whose declaration is missing fails here, by name.

The finished run is one run on the bundled sample with a model of every translator and every
built-in metric family, made as cheaply as such a run can be left: every output of every job
written, with the provenance record its job writes for the outputs whose currency the workflow
decides, then Snakemake's own records of every job (`snakemake --touch --forceall`). Translators
and metrics are not run (most need models that cannot be had offline): what is tested is the
plan, through Snakemake's in-process API, one dry run per case.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bouquet_eval.core.config import ConfigError, job_name
from bouquet_eval.planning import channel, schema
from bouquet_eval.planning.channel import OUTPUTS, Declared, declared_settings, model_of
from bouquet_eval.planning.plan import Sources, load_plan
from bouquet_eval.translators.backends import BACKENDS, Setting, _setting

from .conftest import PLUGINS, REPOSITORY, SAMPLE, SNAKEFILE, Workflow
from .hf_cache import cache_entry
from .sample_forms import sample_judgements
from .test_settings import another_value

SCHEMA_FILE = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"
SETTINGS = declared_settings(schema.load_schema(SCHEMA_FILE))
DIRECTIONS = ["eng_Latn-fra_Latn", "deu_Latn-eng_Latn"]


def targets(config: Mapping[str, Any]) -> list[str]:
    """Every target; a submission and a verification of the first model (each model's are
    alike)."""
    folder, first = config.get("output_dir", "runs"), config["models"][0]["name"]
    mine = [f"{folder}/submission/{first}.tar.gz", f"{folder}/{first}/verification.csv"]
    return ["all", "compare", "mtme", "metaeval", *mine]


GLOTLID = "cis-lmu/glotlid/model_v3.bin"


def finished_config(files: Path) -> dict[str, Any]:
    """A model of every translator, every family of metrics, human judgements, prices."""
    weights = str(files / "weights")
    return {
        "dataset": {"path": str(files / "dataset")},
        "directions": {"list": DIRECTIONS},
        "limit": 3,
        "shards": 1,
        "metrics": [
            "chrf",
            "metricx",
            "glotlid",
            "comet",
            "cometkiwi",
            "xcomet",
            "blaser",
            "blaser_qe",
        ],
        # On the CPU, in GlotLID's family: four families of score jobs, each tested.
        "metricx": {"model": weights, "tokenizer": weights, "device": "cpu"},
        "comet": {"model": weights},
        "cometkiwi": {"model": weights},
        "xcomet": {"model": weights},
        "blaser": {"encoder": weights, "checkpoint": weights},
        "blaser_qe": {"encoder": weights, "checkpoint": weights},
        "prices": {"api": {"input": 1.0, "output": 2.0}},
        "metaeval": {"judgements": str(files / "judged.parquet")},
        "models": [
            {"name": "copy", "translator": "copy-source"},
            {"name": "given", "translator": "provided", "path": str(files / "given")},
            {"name": "api", "translator": "openai", "model": "gpt-x", "api_key_env": None},
            {"name": "llm", "translator": "vllm", "model": weights},
            {"name": "nllb", "translator": "nllb", "model": weights},
            {"name": "madlad", "translator": "madlad", "model": weights},
            {"name": "aya", "translator": "aya", "model": weights},
            {
                "name": "own",
                "translator": "recording:RecordingTranslator",
                "translator_kwargs": {"record": str(files / "record.txt")},
                "prompt_fn": "recording:make_tagged_prompt",
                "prompt_kwargs": {"prefix": "> "},
            },
        ],
    }


@dataclass(frozen=True)
class Planned:
    """A dry run's plan: every job of the targets, which of them run, and how they connect."""

    shapes: Mapping[str, tuple[frozenset[str], frozenset[str]]]
    """Job -> (its outputs, its inputs)."""
    outputs: Mapping[str, list[str]]
    """Job -> its outputs and its benchmark file, which Snakemake takes as one."""
    running: Mapping[str, str]
    """The jobs that run, with Snakemake's reason."""
    dependents: Mapping[str, set[str]]
    stages: Mapping[str, tuple[str, str | None, str | None]]
    """Job -> (stage, model, family of metrics)."""
    families: Mapping[str, tuple[str, ...]]


def job_key(job: Any) -> str:
    wildcards = ",".join(f"{k}={v}" for k, v in sorted((job.wildcards_dict or {}).items()))
    return f"{job.rule.name}[{wildcards}]" if wildcards else job.rule.name


def stages_of(plan: Any) -> Callable[[Any], tuple[str, str | None, str | None]]:
    """The stage, model and family of each job of a workflow planned with `plan`."""
    dynamic: dict[str, tuple[str, str | None, str | None]] = {}
    for model in [*plan.models.values(), *plan.judged.values()]:
        name = job_name(model.name)
        for shard in model.shards:
            dynamic[f"translate_{name}_{shard}"] = ("translate", model.name, None)
            dynamic[f"score_{name}_{shard}"] = ("score", model.name, None)
            for family in plan.families:
                dynamic[f"score_{family}_{name}_{shard}"] = ("score", model.name, family)
    fixed = {"submission_model": "submission", "verify_model": "verify"}

    def classify(job: Any) -> tuple[str, str | None, str | None]:
        rule = job.rule.name
        if rule in dynamic:
            return dynamic[rule]
        return fixed.get(rule, rule), (job.wildcards_dict or {}).get("model"), None

    return classify


def dry_run(workdir: Path, config: Mapping[str, Any], touch: bool = False) -> Planned:
    """The plan of Snakemake's in-process API for the targets, as a dry run (or a run with
    --touch --forceall) leaves it."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        ExecutionSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
        StorageSettings,
    )

    configfile = workdir / "config.yaml"
    configfile.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=2),
            config_settings=ConfigSettings(configfiles=[configfile]),
            storage_settings=StorageSettings(),
            snakefile=SNAKEFILE,
            workdir=workdir,
        )
        dag_api = workflow_api.dag(
            # As the workflow's profile has it (workflow/profiles/default).
            DAGSettings(targets=set(targets(config)), forceall=touch, max_checksum_file_size=0)
        )
        dag_api.execute_workflow(
            executor="local",
            pseudo_executor="touch" if touch else "dryrun",
            execution_settings=ExecutionSettings(),
        )
        workflow = workflow_api._workflow
        dag, plan = workflow.dag, workflow.globals["PLAN"]
        classify = stages_of(plan)
        jobs = {job_key(job): job for job in dag.jobs}
        dependents: dict[str, set[str]] = {key: set() for key in jobs}
        for key, job in jobs.items():
            for upstream in dag.dependencies[job]:
                dependents[job_key(upstream)].add(key)
        return Planned(
            shapes={
                key: (frozenset(map(str, job.output)), frozenset(map(str, job.input)))
                for key, job in jobs.items()
            },
            outputs={
                key: [
                    str(path) for path in [*job.output, *([job.benchmark] if job.benchmark else [])]
                ]
                for key, job in jobs.items()
            },
            running={key: str(dag.reason(job)) for key, job in jobs.items() if dag.needrun(job)},
            dependents=dependents,
            stages={key: classify(job) for key, job in jobs.items()},
            families={family: tuple(names) for family, names in plan.families.items()},
        )


def with_outputs(keys: set[str], planned: Planned) -> set[str]:
    """The jobs that make files: targets that only gather run whenever asked for."""
    return {key for key in keys if planned.outputs[key]}


@dataclass
class Finished:
    workdir: Path
    files: Path
    config: dict[str, Any]
    planned: Planned


def write_outputs(workdir: Path, config: dict[str, Any], planned: Planned) -> None:
    """Every output of the plan, and the provenance records of those whose currency the
    workflow decides, as their jobs write them (run in `workdir`)."""
    for paths in planned.outputs.values():
        for name in paths:
            path = workdir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(("mtme/bouquet", "mtme/metbouquet")):
                path.mkdir(exist_ok=True)
            else:
                path.write_text(f"{name}\n", encoding="utf-8")
    plan = load_plan(copy.deepcopy(config), SCHEMA_FILE, Sources(REPOSITORY), fetch=False)
    models = [*plan.models.values(), *plan.judged.values()]
    records = []
    for model in models:
        directions = sorted({d for part in model.shards.values() for d in part})
        if model in plan.models.values():
            records += plan.translation_outputs(model, directions)
            records += plan.aggregate_outputs(model)
        for family in plan.families:
            records += plan.metric_scores_outputs(model, family, directions)
        records += plan.scored_outputs(model, directions)
    for record in records:
        record.record_written()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    files = tmp_path_factory.mktemp("channel-files")
    workdir = tmp_path_factory.mktemp("channel-run")
    shutil.copytree(SAMPLE, files / "dataset")
    shutil.copytree(SAMPLE, files / "dataset-copy")
    for weights in ("weights", "other-weights"):
        (files / weights).mkdir()
    (files / "glotlid.bin").write_bytes(b"a fastText model")
    for given in ("given", "given-copy"):
        (files / given).mkdir()
        for direction in SAMPLE.glob("*.parquet"):  # every direction, for any selection
            (files / given / f"{direction.stem}.jsonl").write_text("{}\n", encoding="utf-8")
    judged = sample_judgements()
    judged = judged[judged["system"] != "poor"]  # two systems are enough to plan for
    for column in list(judged.columns):
        # Each column twice, so that any of metaeval.columns can name another one.
        judged[f"{column}_again"] = judged[column]
    judged.to_parquet(files / "judged.parquet")
    judged.to_parquet(files / "judged-copy.parquet")
    submission = files / "received" / "sub"
    submission.mkdir(parents=True)
    (submission / "scores.csv").write_text(
        "src_lang,tgt_lang,n_sentences\neng_Latn,fra_Latn,3\n", encoding="utf-8"
    )
    hub = files / "hf" / "hub"
    repository, filename = GLOTLID.rsplit("/", 1)
    cache_entry(hub, repository, {filename: b"a fastText model"})
    config = finished_config(files)
    patch = pytest.MonkeyPatch()
    patch.syspath_prepend(str(PLUGINS))
    patch.setenv("HF_HUB_OFFLINE", "1")
    try:
        planned = dry_run(workdir, config)
        patch.chdir(workdir)
        write_outputs(workdir, config, planned)
        # Snakemake's records of every job, as a run leaves them; in a process of its own, for
        # the Hugging Face cache that holds GlotLID's model. dry_run wrote the configuration.
        touched = subprocess.run(
            Workflow(workdir).command("--touch", "--forceall", *targets(config)),
            cwd=workdir,
            env=Workflow.environment({"HF_HOME": str(files / "hf")}),
            capture_output=True,
            text=True,
        )
        assert touched.returncode == 0, touched.stdout + touched.stderr
        planned = dry_run(workdir, config)
        assert not with_outputs(set(planned.running), planned), planned.running
        yield Finished(workdir, files, config, planned)
    finally:
        patch.undo()


# What to change a setting to, where no value its schema allows would do: the keys are the
# settings' names (`Declared.name`); each takes the run's folder of files.
CHANGED: dict[str, Callable[[Path], Any]] = {
    "dataset.path": lambda files: str(files / "dataset-copy"),
    "directions.src_langs": lambda files: ["eng_Latn"],
    "directions.tgt_langs": lambda files: ["fra_Latn"],
    "directions.list": lambda files: DIRECTIONS[:1],
    "directions.shard": lambda files: "0/2",
    "output_dir": lambda files: "elsewhere",
    "shards": lambda files: 2,
    "metrics": lambda files: [*finished_config(files)["metrics"], "ter"],
    "metricx.model": lambda files: str(files / "other-weights"),
    "metricx.tokenizer": lambda files: str(files / "other-weights"),
    "glotlid.model": lambda files: str(files / "glotlid.bin"),
    "comet.model": lambda files: str(files / "other-weights"),
    "cometkiwi.model": lambda files: str(files / "other-weights"),
    "xcomet.model": lambda files: str(files / "other-weights"),
    **dict.fromkeys(
        [f"{form}.{key}" for form in ("blaser", "blaser_qe") for key in ("encoder", "checkpoint")],
        lambda files: str(files / "other-weights"),
    ),
    **dict.fromkeys(
        ["blaser.languages", "blaser_qe.languages"], lambda files: {"fra_Latn": "fra_Latn"}
    ),
    "environments": lambda files: {"comet": sys.executable},
    "compare.baseline": lambda files: "given",
    "compare.models": lambda files: ["copy", "given"],
    "verify.tolerance": lambda files: {"chrfpp": 0.5},
    "submissions": lambda files: [str(files / "received" / "sub")],
    "metaeval.judgements": lambda files: str(files / "judged-copy.parquet"),
    "models[].name": lambda files: "renamed",
    "models[].translator": lambda files: "reference",
    "models[].translator_kwargs": lambda files: {
        "record": str(files / "record.txt"),
        "suffix": " changed",
    },
    "models[].prompt_fn": lambda files: "recording:tagged_prompt",
    "models[].prompt_kwargs": lambda files: {"prefix": "< "},
    "models[].shards": lambda files: 2,
    "models[provided].path": lambda files: str(files / "given-copy"),
    **dict.fromkeys(
        [f"models[{translator}].model" for translator in ("vllm", "nllb", "madlad", "aya")],
        lambda files: str(files / "other-weights"),
    ),
}

ENTRY_MODELS = {
    "translator_kwargs": "own",
    "prompt_kwargs": "own",
    "name": "copy",
    "translator": "copy",
}
"""The model a setting of every entry is changed in (by default the vLLM one)."""
KEYS = {"*": "api", "<^score_[a-z0-9]+_(cpu|gpu)$>": "score_metrics_gpu"}
"""The key a setting of a mapping is changed under."""


def where_of(setting: Declared, config: Mapping[str, Any]) -> tuple[Any, ...]:
    """Where in the run's configuration the setting is changed."""
    where: list[Any] = []
    for part in setting.path:
        if part.startswith("["):
            translator = part[1:-1]
            wanted = ENTRY_MODELS.get(setting.path[-1], "llm")
            where.append(
                next(
                    index
                    for index, entry in enumerate(config["models"])
                    if entry["translator"] == translator
                    or (not translator and entry["name"] == wanted)
                )
            )
        else:
            where.append(KEYS.get(part, part))
    return tuple(where)


def value_at(config: Any, where: tuple[Any, ...]) -> Any:
    for part in where:
        if isinstance(config, dict) and part not in config:
            return None
        config = config[part]
    return config


def set_at(config: Any, where: tuple[Any, ...], value: Any) -> None:
    for part in where[:-1]:
        config = config.setdefault(part, {}) if isinstance(config, dict) else config[part]
    config[where[-1]] = value


def remove_at(config: Any, where: tuple[Any, ...]) -> None:
    for part in where[:-1]:
        config = config[part]
    del config[where[-1]]


def changed_value(setting: Declared, current: Any, files: Path) -> Any:
    if setting.name in CHANGED:
        return CHANGED[setting.name](files)
    if setting.path[:2] == ("metaeval", "columns"):
        return f"{setting.default}_again"  # the judgements' copy of the column it names
    try:
        return another_value(setting.schema, current if current is not None else setting.default)
    except StopIteration:
        raise AssertionError(f"{setting.name}: add a value to change it to to CHANGED") from None


def expected_jobs(
    setting: Declared,
    where: tuple[Any, ...],
    config: Mapping[str, Any],
    before: Planned,
    after: Planned,
) -> set[str]:
    """The jobs its declaration says the change reruns: those of the stages that read it (of
    its model, for a model's own setting; of its metric's family, for a metric's), those that a
    change of the run's shape makes or regroups, and every job downstream of them."""
    stages = {stage for kind in setting.changes or () if kind in OUTPUTS for stage in OUTPUTS[kind]}
    model = model_of(where, config)
    direct = set()
    for key, (stage, job_model, family) in after.stages.items():
        if stage not in stages:
            continue
        if model is not None and stage in ("translate", "aggregate") and job_model != model:
            continue
        metric = setting.metric
        if metric is not None and family is not None and metric not in after.families[family]:
            continue
        # A family's score jobs read nothing of `metrics`: their outputs say which metrics
        # they compute, and only a metric added to the family gives them outputs to make.
        gains = family is not None and bool(
            set(after.families[family]) - set(before.families.get(family, ()))
        )
        if setting.path == ("metrics",) and family is not None and not gains:
            continue
        direct.add(key)
    if "environment" in setting.shapes:
        direct |= environment_jobs(where, config, after)
    if set(setting.shapes) - {"environment"}:
        known = set(before.shapes.values())

        def only_lost_outputs(key: str, shape: tuple[frozenset[str], frozenset[str]]) -> bool:
            # A family's score job left with fewer metrics (one moved to another family) has
            # nothing to make: its outputs say which metrics it computes.
            old = before.shapes.get(key)
            family = after.stages.get(key, (None, None, None))[2]
            return (
                family is not None and old is not None and shape[0] <= old[0] and shape[1] == old[1]
            )

        direct |= {
            key
            for key, shape in after.shapes.items()
            if shape not in known and not only_lost_outputs(key, shape)
        }
    reached, frontier = set(direct), list(direct)
    while frontier:
        for dependent in after.dependents[frontier.pop()]:
            if dependent not in reached:
                reached.add(dependent)
                frontier.append(dependent)
    return with_outputs(reached, after)


def environment_jobs(where: tuple[Any, ...], config: Mapping[str, Any], after: Planned) -> set[str]:
    """The jobs whose software environment a section of `resources` (or of a model's) is
    for: its environment modules are part of it."""
    from bouquet_eval.metrics.records import MetricSet

    if where[0] == "models":
        model = model_of(where, config)
        return {
            k for k, (stage, m, _) in after.stages.items() if stage == "translate" and m == model
        }
    section = where[1]
    joint = MetricSet.of(config["metrics"], config).joint_environment()
    verified = next(f for f in after.families if f.rsplit("_", 1)[0] == joint)
    sections = {
        "translate": {"translate"},
        "aggregate": {"aggregate"},
        "verify": {"score", f"score_{verified}"},
    }
    found = set()
    for key, (stage, _, family) in after.stages.items():
        if family is not None:
            found |= {key} if section in ("score", f"score_{family}") else set()
        elif section in sections.get(stage, ()):
            found.add(key)
    return found


def check_rerun(
    finished: Finished, setting: Declared, where: tuple[Any, ...], config: dict[str, Any]
) -> None:
    after = dry_run(finished.workdir, config)
    expected = expected_jobs(setting, where, config, finished.planned, after)
    running = with_outputs(set(after.running), after)
    unexpected = {key: after.running[key] for key in running - expected}
    assert not unexpected, (
        f"{setting.name}: jobs that its declaration does not name ran: {unexpected}"
    )
    assert running == expected, (
        f"{setting.name}: jobs that did not run: {sorted(expected - running)}"
    )
    if setting.changes and set(setting.changes) - {"jobs", "sentences"}:
        # Not vacuous: the declared jobs are part of the run, and reran.
        assert expected or not any(
            stage in OUTPUTS.get(kind, ())
            for kind in setting.changes
            for stage, _, _ in after.stages.values()
        ), setting.name


CHANGING_NOTHING = [setting for setting in SETTINGS if setting.changes == ()]
"""Settings declared to change no output: tested together, in one dry run."""


@pytest.mark.parametrize(
    "name", [setting.name for setting in SETTINGS if setting not in CHANGING_NOTHING]
)
def test_a_changed_setting_reruns_what_it_declares(finished: Finished, name: str) -> None:
    setting = next(s for s in SETTINGS if s.name == name)
    assert setting.changes is not None, (
        f"{name} declares nothing: give it `changes` in the schema (or its record), the outputs "
        f"it can change ({', '.join(OUTPUTS)}), its shape ({', '.join(channel.SHAPES)}) or [] "
        "(docs/design.md, 'How a setting reaches a job')"
    )
    assert not channel.undeclared([setting]), f"{name}: {setting.changes} names an unknown kind"
    # Where it is in the finished run's configuration: a changed model name names no entry.
    where = where_of(setting, finished.config)
    check_rerun(finished, setting, where, changed_config(finished, [setting]))


def changed_config(finished: Finished, settings: list[Declared]) -> dict[str, Any]:
    """The finished run's configuration with each of `settings` changed."""
    config = copy.deepcopy(finished.config)
    for setting in settings:
        where = where_of(setting, config)
        set_at(config, where, changed_value(setting, value_at(config, where), finished.files))
    return config


def changed_together(finished: Finished, settings: list[Declared]) -> dict[str, str]:
    """The jobs that make files and rerun, with Snakemake's reasons, with every one of
    `settings` changed."""
    after = dry_run(finished.workdir, changed_config(finished, settings))
    return {key: after.running[key] for key in with_outputs(set(after.running), after)}


def test_settings_that_change_nothing_rerun_nothing(finished: Finished) -> None:
    """Every setting declared to change nothing (`changes: []`: resources, concurrency,
    timeouts, environments...) changed, together: a job reruns when a value it records, or a
    digest of its outputs, differs, and changes of distinct settings cannot cancel out, so none
    of them reruns anything alone either (two dry runs instead of one per setting). Where
    jobs rerun, each setting is changed alone, to name those that reran them."""
    assert len(CHANGING_NOTHING) > 20  # every section of `resources`, and more
    # A job's resources take a GPU's type from gpu_model or gres, not both: gres apart.
    apart = [setting for setting in CHANGING_NOTHING if setting.path[-1] == "gres"]
    running = {
        **changed_together(finished, [s for s in CHANGING_NOTHING if s not in apart]),
        **changed_together(finished, apart),
    }
    if running:
        for setting in CHANGING_NOTHING:
            alone = changed_config(finished, [setting])
            check_rerun(finished, setting, where_of(setting, alone), alone)
    assert not running, running


UNREMOVABLE = {
    "dataset.path": "without it the dataset is the Hub's, which a test cannot reach",
    "metaeval.judgements": "without them the metaeval target is an error",
}
REMOVED = [
    name
    for name, where in (
        (setting.name, where_of(setting, finished_config(Path("/files"))))
        for setting in SETTINGS
        if setting.has_default and setting.name not in UNREMOVABLE
    )
    if value_at(finished_config(Path("/files")), where) is not None
]


@pytest.mark.parametrize("name", REMOVED)
def test_a_setting_removed_reruns_what_it_declares(finished: Finished, name: str) -> None:
    """Left out of the configuration, a setting the run set takes its default."""
    setting = next(s for s in SETTINGS if s.name == name)
    config = copy.deepcopy(finished.config)
    where = where_of(setting, config)
    remove_at(config, where)
    check_rerun(finished, setting, where, config)


NEW = "new_setting"


def with_new_settings(monkeypatch: pytest.MonkeyPatch, default: int = 7) -> None:
    """A release that adds, with its default, a setting to every section of the schema, to
    every metric's settings and to every translator's: the metrics and translators built with
    them take it as they would a setting of their own."""
    load = schema.load_schema

    def extended(path: Any) -> dict[str, Any]:
        complete = load(path)
        for section in complete["properties"].values():
            if "properties" in section:
                # What the section's first setting that changes an output can change.
                siblings = [value.get("changes", []) for value in section["properties"].values()]
                section["properties"][NEW] = {
                    "type": "integer",
                    "default": default,
                    "added": "9.9.9",
                    "changes": next((c for c in siblings if c), ["aggregates"]),
                }
        return complete

    import bouquet_eval.planning.plan as plan

    monkeypatch.setattr(schema, "load_schema", extended)
    monkeypatch.setattr(plan, "load_schema", extended)
    for backend in BACKENDS.values():
        settings: dict[str, Setting] = backend.settings  # type: ignore[assignment]
        monkeypatch.setitem(settings, NEW, _setting({"type": "integer"}, default, added="9.9.9"))
    import bouquet_eval.metrics as metrics

    load_metric = metrics.load_metric

    def taking_it(name: str, settings: dict[str, Any] | None = None) -> Any:
        return load_metric(name, {k: v for k, v in (settings or {}).items() if k != NEW})

    monkeypatch.setattr(metrics, "load_metric", taking_it)
    import bouquet_eval.planning.estimate as estimate

    translator = estimate.OpenAIChatTranslator

    def translator_taking_it(**arguments: Any) -> Any:
        return translator(**{k: v for k, v in arguments.items() if k != NEW})

    monkeypatch.setattr(estimate, "OpenAIChatTranslator", translator_taking_it)


def test_settings_a_release_adds_with_their_defaults_rerun_nothing(
    finished: Finished, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is stale after an upgrade that adds settings whose defaults reproduce the
    earlier behaviour: the slices, and so the digests, do not change."""
    plan = load_plan(copy.deepcopy(finished.config), SCHEMA_FILE, Sources(REPOSITORY), fetch=False)
    with_new_settings(monkeypatch)
    upgraded = load_plan(
        copy.deepcopy(finished.config), SCHEMA_FILE, Sources(REPOSITORY), fetch=False
    )
    assert upgraded.slices == plan.slices
    assert {n: m.translation_settings for n, m in upgraded.models.items()} == {
        n: m.translation_settings for n, m in plan.models.items()
    }
    after = dry_run(finished.workdir, finished.config)
    assert not with_outputs(set(after.running), after), after.running
    # Set to another value, each is what its declaration says.
    statistics = ("aggregates", "leaderboard", "comparison", "metaeval", "verification")
    llm = next(i for i, m in enumerate(finished.config["models"]) if m["translator"] == "vllm")
    cases: list[tuple[tuple[str, ...], tuple[Any, ...], tuple[str, ...]]] = [
        (("statistics", NEW), ("statistics", NEW), statistics),
        (("metricx", NEW), ("metricx", NEW), ("scores",)),
        (("models", "[vllm]", NEW), ("models", llm, NEW), ("translations",)),
    ]
    for path, where, changes in cases:
        config = copy.deepcopy(finished.config)
        set_at(config, where, 8)
        setting = Declared(path, changes, {"type": "integer", "default": 7, "added": "9.9.9"})
        check_rerun(finished, setting, where, config)


def test_every_setting_declares_what_it_can_change() -> None:
    assert channel.undeclared(SETTINGS) == []
    names = [setting.name for setting in SETTINGS]
    # Every section, every translator's settings and every metric's are there.
    for name in ("statistics.seed", "metaeval.decide_by", "verify.tolerance", "limit"):
        assert name in names
    for translator, backend in BACKENDS.items():
        for key in backend.settings:
            assert f"models[{translator}].{key}" in names
    from bouquet_eval.metrics.records import RECORDS

    for metric, record in RECORDS.items():
        for key, declared in (record.settings or {}).items():
            assert f"{metric}.{key}" in names
            # A metric is built with its section as its score jobs receive it: every setting of
            # it is in their slice, as what decides its scores.
            assert "scores" in declared["changes"], f"{metric}.{key}"


def test_a_new_setting_without_its_declaration_is_named() -> None:
    complete = schema.load_schema(SCHEMA_FILE)
    complete["properties"]["statistics"]["properties"]["new_one"] = {"type": "integer"}
    assert channel.undeclared(declared_settings(complete)) == ["statistics.new_one"]


def test_the_stale_outputs_name_the_setting_that_changed(finished: Finished, capfd: Any) -> None:
    config = copy.deepcopy(finished.config)
    config["statistics"] = {"seed": 7}
    dry_run(finished.workdir, config)
    err = capfd.readouterr().err
    # A model's six aggregates (data.outputs.AGGREGATES, report_extract.parquet among them).
    assert "6 because its settings changed: statistics.seed (12345 -> 7)" in err, err
    assert json.dumps(7) in err


def test_a_setting_that_would_end_the_reports_script_element_is_refused() -> None:
    """Snakemake's report writes the parameters of the jobs whose outputs it shows, their
    settings among them, into a script element as they are."""
    config = {
        "dataset": {"path": str(SAMPLE)},
        "metrics": ["chrf", "metricx"],
        "metricx": {"model": "models/</script><script>alert(1)"},
        "models": [{"name": "copy", "translator": "copy-source"}],
    }
    with pytest.raises(ConfigError, match=r"^metricx\.model holds '</'") as refused:
        load_plan(config, SCHEMA_FILE, Sources(REPOSITORY), fetch=False)
    assert refused.value.key == "metricx.model"
