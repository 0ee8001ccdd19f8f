"""The plan of a run: everything the validated configuration decides, derived once.

The workflow builds one `Plan` while Snakemake parses it (`load_plan`). Every job receives two
things from it: the slice of the configuration its rule reads (`Plan.settings`, plain data that
Snakemake records and compares, bouquet_eval.planning.channel), and the plan itself, whose typed
fields (the dataset, the directions, the models' folders, what changes no output) Snakemake does
not record. The plan holds no configuration of its own: jobs never derive settings, paths, the
dataset or the secrets' names from the configuration themselves. Whether an existing output is
current is decided in one place, `bouquet_eval.core.freshness`, from digests of the same slices.

Building a plan writes nothing and changes no environment variable. It reads files: the
configuration's schema, the dataset's folder, a table saved by `datasets` (whose language
columns name the directions until it is laid out per direction), the Hugging Face cache, a
local table of human judgements. Where `fetch` is set (the workflow's main process), it asks
the Hub which commit the revision of a dataset on the Hub, and of Met-BOUQuET, is and which
files it holds there, and reads Met-BOUQuET's files from the Hub into memory where the cache
lacks them (the judged systems decide the plan's jobs). The workflow's main process downloads
the dataset's files or lays the saved table out (`data.dataset.prepare_dataset`), downloads
Met-BOUQuET's files (`data.judgements.download_judgements`), checks the dataset's files and
announces the selection once Snakemake plans the run, not while it parses the workflow.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bouquet_eval.core.config import ConfigError, expand_path
from bouquet_eval.core.environment import workflow_commit
from bouquet_eval.core.freshness import ResumableOutput
from bouquet_eval.core.home import HOME_VARIABLE
from bouquet_eval.core.names import shown
from bouquet_eval.core.secrets import refuse_secrets, secret_values, secret_variables
from bouquet_eval.data.dataset import DatasetSource, Direction, resolve_dataset, select_directions
from bouquet_eval.data.hub import PARTS, HubFiles, is_local
from bouquet_eval.data.judgements import JudgementSource, judged_systems, resolve_judgements
from bouquet_eval.data.outputs import (
    aggregate_outputs,
    metric_scores_output,
    score_settings,
    scored_output,
    translation_output,
)
from bouquet_eval.data.received import (
    ArchiveLimits,
    ReceivedSubmission,
    SubmissionError,
    receive,
)
from bouquet_eval.metrics import load_metrics
from bouquet_eval.metrics.records import RECORDS, MetricSet
from bouquet_eval.planning.channel import declared_settings, slice_of
from bouquet_eval.planning.cost import is_batch, model_price
from bouquet_eval.planning.schema import load_schema, plain_config, validate_config
from bouquet_eval.planning.sharding import AUTO, assign_shards, take_part
from bouquet_eval.translators.backends import (
    BACKENDS,
    deciding_settings,
    model_cpus,
    model_environment,
    model_gpus,
    operational_settings,
    prompt_fn_spec,
    translator_arguments,
)
from bouquet_eval.translators.prompt import PROMPT_TEMPLATE
from bouquet_eval.translators.request_cache import REQUEST_CACHE


@dataclass(frozen=True)
class Sources:
    """Where the workflow's own files are, and the git commit they are a copy of (None for a
    local checkout, whose commit git tells)."""

    repository: Path
    commit: str | None = None

    def describe(self) -> dict[str, Any] | None:
        """The commit for the manifest, asked of git where the files are a checkout."""
        if self.commit:
            return {"commit": self.commit, "modified": False}
        return workflow_commit(self.repository)


@dataclass(frozen=True)
class ModelPlan:
    """One model entry of the configuration, with what the workflow derives from it."""

    name: str
    entry: Mapping[str, Any]
    """The configuration's entry, its `path` expanded."""
    folder: Path
    """Where its outputs go."""
    translation_settings: Mapping[str, Any]
    """What decides its translations (`translation_settings`)."""
    provided: Path | None
    """The folder of translations brought from elsewhere (translator `provided`)."""
    gpus: int
    """GPUs of each of its translate jobs."""
    cpus: int
    """CPUs of each of its translate jobs unless `resources` says otherwise."""
    environment: str
    """The conda environment of its translate jobs (envs/<environment>.yaml)."""
    price: Mapping[str, Any] | None
    """Its prices per million tokens (`prices.<name>`), None where none are given."""
    batch: bool
    """Whether it translates through the Batch API, at its discount."""
    shards: Mapping[str, Sequence[Direction]]
    dataset: DatasetSource | None = None
    """Its own sentences, where they are not the run's dataset (a judged system's)."""
    translator: str = "provided"
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """What its translator is built with, besides the job's context (`translator_arguments`)."""
    operational: Mapping[str, Any] = field(default_factory=dict)
    """Those of its `arguments` that change only the speed of its translations: its translate
    jobs receive them here, unrecorded; the rest, in their slice of the configuration."""
    prompt_fn: str | None = None
    """Its prompt function: its own, its backend's, or None for the default (`prompt_fn_spec`)."""
    prompt_kwargs: Mapping[str, Any] | None = None
    api_key_env: str | None = None
    """The environment variable that holds its API key, None where it needs none."""
    api_key_setting: str = "api_key_env"
    """Where in its entry `api_key_env` is set (a translator of one's own: its kwargs)."""
    weights: tuple[str, str | None] | None = None
    """The model and revision its translator loads by Hub id or path (`Backend.hub_model`)."""
    hub_needs: Sequence[HubFiles] = ()
    """What its translate jobs load from the Hub (`data.prefetch`)."""
    resources: Mapping[str, Any] = field(default_factory=dict)
    """Its own `resources`, over the configuration's for its translate jobs."""
    request_cache: Path | None = None
    """Where its translator keeps every paid answer as it arrives, which its translate jobs
    hand it (`Backend.request_cache`); None for a translator that keeps none."""
    takes_limit: bool = False
    """Whether its translate jobs hand its translator the run's `limit` (`Backend.takes_limit`)."""
    fits_run: bool = False
    """Whether its shards are `auto`: fitted to the run's cores (`Plan.fitted`)."""

    @property
    def translated_in_place(self) -> bool:
        """Whether its provided translations already sit in its output folder: they are scored
        where they are, and no job writes them."""
        return self.provided is not None and self.provided.resolve() == self.folder.resolve()

    def provided_file(self, direction: Direction) -> Path | None:
        return None if self.provided is None else self.provided / f"{direction}.jsonl"


STAGES_OF_A_MODEL = ("translate", "aggregate")
"""The stages whose slices are a model's own (its entry's settings, its prices)."""
STAGES_OF_THE_RUN = (
    "score",
    "heatmaps",
    "leaderboard",
    "compare",
    "mtme",
    "metaeval_inputs",
    "metaeval",
    "submission",
    "verify",
    "prefetch",
)
"""The stages whose slices are the run's (`score`: the jobs that gather every metric's columns;
a family of metrics' score jobs record what they read beside their metrics, `plan_slices`)."""


@dataclass(frozen=True)
class Plan:
    sources: Sources
    output_dir: Path
    dataset: DatasetSource
    directions: Sequence[Direction]
    """The directions of this run: those the filters select, or this part of them
    (`directions.shard`)."""
    selected: int
    """How many directions the filters select, before a part of them is taken."""
    part: str | None
    """This run's part of the selection (`directions.shard`), which its models' shards split."""
    models: Mapping[str, ModelPlan]
    metrics: Sequence[str]
    families: Mapping[str, Sequence[str]]
    """The families of metrics whose score jobs are their own (`MetricSet.families`)."""
    slices: Mapping[tuple[str, str | None], Mapping[str, Any]]
    """(stage, model or family) -> what its jobs read of the configuration (`settings`)."""
    limit: int | None
    """Sentences per direction, for what the main process reads itself (the selection's
    announcement, the estimates of a dry run); jobs read it in their slice."""
    stall_timeout: float | None
    """Seconds a translate job waits for its translator to move (changes no output)."""
    allow_unchecked_claims: bool
    """Whether `verify` passes a claim on values this configuration does not recompute: the
    verdict's alone, which writes no output (the verifications list those values either way)."""
    python_path: Sequence[str]
    """Where code of one's own is imported from, as configured (changes no output)."""
    received: Mapping[str, ReceivedSubmission]
    """Submissions received for verification (`submissions`), by folder name."""
    secret_variables: frozenset[str]
    """The environment variables that hold secrets; their values are read where needed, so
    that no secret travels inside a plan."""
    judgements: JudgementSource | None = None
    """The human judgements of `metaeval`, checked; None when none are configured."""
    judged: Mapping[str, ModelPlan] = field(default_factory=dict)
    """Each judged system as a model whose translations are given: scored by the score jobs."""

    def __str__(self) -> str:
        # What Snakemake shows of a job's params (its report embeds them unescaped in a
        # script element): a summary, with no text of the configuration.
        return f"plan of {len(self.models)} model(s) on {len(self.directions)} direction(s)"

    def settings(
        self, stage: str, model: str | None = None, family: str | None = None
    ) -> Mapping[str, Any]:
        """What the jobs of `stage` read of the configuration (a model's, for the stages of a
        model; a family's score jobs', given the family): the parameter `settings` of the
        rule, which Snakemake records and compares (bouquet_eval.planning.channel)."""
        return self.slices[(stage, model if stage in STAGES_OF_A_MODEL else family)]

    def fitted(self, jobs_at_once: Callable[[ModelPlan], int | None]) -> Plan:
        """This plan with each `shards: auto` model (and judged system) in as many shards as
        `jobs_at_once(model)` says: how many of its jobs the run holds at once (None: as
        planned)."""

        def fitted_model(model: ModelPlan, part: str | None) -> ModelPlan:
            count = jobs_at_once(model) if model.fits_run else None
            if count is None:
                return model
            directions = [d for chosen in model.shards.values() for d in chosen]
            return replace(model, shards=assign_shards(directions, count, part))

        part = self.part
        return replace(
            self,
            models={name: fitted_model(m, part) for name, m in self.models.items()},
            judged={name: fitted_model(m, None) for name, m in self.judged.items()},
        )

    def import_folders(self) -> list[str]:
        """`python_path`, absolute: where code of one's own is imported from."""
        home = {HOME_VARIABLE: str(self.sources.repository)}
        return [str(expand_path(folder, home).absolute()) for folder in self.python_path]

    def secrets(self) -> frozenset[str]:
        """The secret values this process knows (see `secrets.known_secrets`)."""
        return secret_values(self.secret_variables)

    def translation_outputs(
        self, model: ModelPlan, directions: Sequence[Direction]
    ) -> list[ResumableOutput]:
        return [
            translation_output(
                model.folder,
                direction,
                model.translation_settings,
                self.dataset.file(direction),
                model.provided_file(direction),
            )
            for direction in directions
        ]

    @property
    def score_settings(self) -> dict[str, Any]:
        """What decides a direction's scored file (`outputs.score_settings`)."""
        settings = self.settings("score")
        return score_settings(settings["metrics"], settings)

    def scored_outputs(
        self, model: ModelPlan, directions: Sequence[Direction]
    ) -> list[ResumableOutput]:
        dataset = self.dataset_of(model)
        settings = self.score_settings
        return [
            scored_output(model.folder, direction, settings, dataset.file(direction))
            for direction in directions
        ]

    def dataset_of(self, model: ModelPlan) -> DatasetSource:
        return model.dataset or self.dataset

    def scoring(self, folder: Path, limit: int | None) -> tuple[DatasetSource, int | None]:
        """The dataset and sentence limit of the score job of the model whose folder is given,
        `limit` being the run's (a judged system's sentences are all of its judged ones)."""
        for model in self.judged.values():
            if model.folder == folder:
                return self.dataset_of(model), None
        return self.dataset, limit

    def metric_scores_outputs(
        self, model: ModelPlan, family: str, directions: Sequence[Direction]
    ) -> list[ResumableOutput]:
        """What the score job of a family of metrics writes for `directions`, each output
        current with its own metric's settings."""
        dataset = self.dataset_of(model)
        settings = self.settings("score")
        return [
            metric_scores_output(model.folder, metric, direction, settings, dataset.file(direction))
            for metric in self.families[family]
            for direction in directions
        ]

    def aggregate_outputs(self, model: ModelPlan) -> list[ResumableOutput]:
        return aggregate_outputs(
            model.folder, self.directions, self.settings("aggregate", model.name)
        )

    def hub_needs(self, translating: Container[str] | None = None) -> list[HubFiles]:
        """What the translate jobs of the models named in `translating` (all by default) load
        from the Hub."""
        return [
            need
            for model in self.models.values()
            if translating is None or model.name in translating
            for need in model.hub_needs
        ]


def load_plan(
    config: dict[str, Any], schema: Path, sources: Sources, *, fetch: bool = True
) -> Plan:
    """Validate `config` in place (filling defaults) and plan from it; ConfigError names the
    setting at fault. `fetch`: whether the Hub may be asked which files the dataset and
    Met-BOUQuET hold, and Met-BOUQuET's files read from it into memory (see
    `data.dataset.resolve_dataset`, `data.judgements.met_bouquet_files`); nothing is written."""
    plain_config(config)
    # Before validation, whose messages may quote a value.
    refuse_secrets(config)
    complete = load_schema(schema)
    validate_config(config, complete)
    home = {HOME_VARIABLE: str(sources.repository)}
    output_dir = expand_path(config["output_dir"], home)
    dataset_settings = dict(config["dataset"])
    if dataset_settings.get("path"):
        dataset_settings["path"] = str(expand_path(dataset_settings["path"], home))
    dataset = resolve_dataset(dataset_settings, fetch=fetch, prepare=False)
    selected = select_directions(
        dataset.directions(),
        src_filter=config["directions"]["src_langs"],
        tgt_filter=config["directions"]["tgt_langs"],
        directions=config["directions"]["list"],
    )
    part = config["directions"]["shard"]
    directions = take_part(selected, part)
    models = {
        entry["name"]: plan_model(
            entry,
            output_dir / entry["name"],
            config["limit"],
            assign_shards(directions, entry.get("shards", config["shards"]), part),
            home,
            model_price(config, entry),
            config["shards"],
        )
        for entry in config["models"]
    }
    refuse_files_as_folders(output_dir, models.values())
    # Read and checked by the main process only (it fetches), before any job starts; the
    # processes of jobs read each one's name.
    received = receive_submissions(
        config["submissions"], dataset, home, ArchiveLimits.of(config["verify"]["limits"]), fetch
    )
    judgements = resolve_judgements(config["metaeval"], home, fetch=fetch)
    judged = {}
    if judgements is not None:
        # Checked whole by the main process only (it fetches), before any job starts.
        for system, judged_system in judged_systems(
            judgements, dataset.directions(), output_dir, check=fetch
        ).items():
            folder = judged_system.folder
            # Named by its folder name, never by the name the table gives (data only), and apart
            # from the models, whose rules and logs share the namespace.
            judged[system] = ModelPlan(
                name=f"metaeval/{judged_system.folder_name}",
                entry={"name": system},
                folder=folder,
                translation_settings={},
                provided=None,
                # Judged systems are scored, never translated: no translate job asks for these.
                gpus=0,
                cpus=1,
                environment="workflow",
                price=None,
                batch=False,
                shards=assign_shards(judged_system.directions, config["shards"], None),
                dataset=DatasetSource(folder / "dataset", {"judged system": system}),
                fits_run=config["shards"] == AUTO,
            )
    scored = [*directions, *(d for m in judged.values() for ds in m.shards.values() for d in ds)]
    refuse_unscorable(config, scored)
    # As the workflow's rules group them (common.smk): from the metrics as loaded.
    metrics = config["metrics"]
    families = MetricSet.of(metrics, config, load_metrics(metrics, config)).families()
    return Plan(
        sources=sources,
        output_dir=output_dir,
        dataset=dataset,
        directions=tuple(directions),
        selected=len(selected),
        part=part,
        models=models,
        metrics=tuple(config["metrics"]),
        families=families,
        # The models' entries as planned: a folder of provided translations is a path expanded.
        slices=plan_slices(
            {**config, "models": [model.entry for model in models.values()]},
            complete,
            list(models),
            families,
        ),
        limit=config["limit"],
        stall_timeout=config["stall_timeout"],
        allow_unchecked_claims=config["verify"]["allow_unchecked_claims"],
        python_path=tuple(config["python_path"]),
        received=received,
        secret_variables=secret_variables(config),
        judgements=judgements,
        judged=judged,
    )


def plan_slices(
    config: Mapping[str, Any],
    schema: Mapping[str, Any],
    models: Sequence[str],
    families: Mapping[str, Sequence[str]],
) -> dict[tuple[str, str | None], Mapping[str, Any]]:
    """Every slice of the configuration that a job reads (`Plan.settings`), computed once."""
    settings = declared_settings(schema)
    slices: dict[tuple[str, str | None], Mapping[str, Any]] = {}
    for stage in STAGES_OF_A_MODEL:
        for name in models:
            slices[(stage, name)] = slice_of(config, settings, stage, model=name)
    # A family's score jobs record what they read beside their metrics: not the list of them
    # (their outputs say which they compute) nor their sections (each metric's reaches its
    # outputs' digests, `Plan.metric_scores_outputs`), so that removing a metric of the family
    # starts none of its jobs.
    beside_metrics = {
        key: value
        for key, value in slice_of(config, settings, "score", metrics=()).items()
        if key != "metrics"
    }
    for family in families:
        slices[("score", family)] = beside_metrics
    for stage in STAGES_OF_THE_RUN:
        slices[(stage, None)] = slice_of(config, settings, stage)
    for stage in REPORTED:
        refuse_in_a_script_element(slices[(stage, None)])
    return slices


REPORTED = ("heatmaps", "leaderboard", "metaeval")
"""The stages whose outputs are in Snakemake's report, which writes their jobs' parameters
into a script element of its page as they are."""


def refuse_in_a_script_element(settings: Any, key: str = "") -> None:
    """ConfigError naming a setting whose value would end the report's script element."""
    if isinstance(settings, Mapping):
        for name, value in settings.items():
            refuse_in_a_script_element(value, f"{key}.{name}" if key else str(name))
    elif isinstance(settings, list):
        for index, value in enumerate(settings):
            refuse_in_a_script_element(value, f"{key}[{index}]")
    elif isinstance(settings, str) and ("</" in settings or "<!--" in settings):
        raise ConfigError(
            f"{key} holds '</' or '<!--', which Snakemake's report (--report) writes as it is "
            "into a script element of its page: use a value without them",
            key,
        )


def refuse_unscorable(config: Mapping[str, Any], directions: Sequence[Direction]) -> None:
    """Before any job: ConfigError naming the directions a built-in metric cannot score with
    its settings (its record's `refuses`: BLASER, a language SONAR has no code for)."""
    names = [name for name in config["metrics"] if name in RECORDS]
    refused = MetricSet.of(names, config).refused(sorted(set(directions)))
    if refused:
        raise ConfigError(". ".join(refused), "metrics")


def receive_submissions(
    paths: Sequence[str],
    dataset: DatasetSource,
    home: Mapping[str, str],
    limits: ArchiveLimits,
    check: bool = True,
) -> dict[str, ReceivedSubmission]:
    """The received submissions by folder name, each read as data within `limits`
    (bouquet_eval.data.received); `check=False` reads their names only."""
    received: dict[str, ReceivedSubmission] = {}
    known = dataset.directions() if paths and check else []
    for index, path in enumerate(paths):
        key = f"submissions[{index}]"
        submission = receive(expand_path(path, home), known, key, limits, check=check)
        taken = received.get(submission.folder_name.casefold())
        if taken is not None:
            same = taken.name == submission.name
            raise SubmissionError(
                f"submissions '{taken.source}' and '{path}' are both of model "
                f"{shown(submission.name)}"
                if same
                else f"submissions '{taken.source}' and '{path}': models {shown(taken.name)} "
                f"and {shown(submission.name)} map to one folder name "
                f"('{taken.folder_name}'); rename one",
                key,
            )
        received[submission.folder_name.casefold()] = submission
    return {submission.folder_name: submission for submission in received.values()}


def model_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """What in a model entry decides its translations.

    Settings that only change speed (a backend's `operational` ones) are left out, so that
    raising an API's concurrency, say, does not make finished translations stale; so are those
    a release added while they hold the default that reproduces the earlier translations
    (`backends.deciding_settings`). The same for a model's entry and for its translate jobs'
    slice of it, which holds no other.
    """
    backend = BACKENDS.get(model["translator"])
    arguments = deciding_settings(model)
    prompt_fn = prompt_fn_spec(model)
    takes_prompts = backend is None or backend.takes_prompts
    return {
        "translator": model["translator"],
        "settings": arguments,
        "prompt_fn": prompt_fn if takes_prompts else None,
        "prompt_kwargs": model.get("prompt_kwargs") if takes_prompts else None,
        # The template is recorded verbatim, so that editing it invalidates translations.
        "prompt_template": PROMPT_TEMPLATE if takes_prompts and prompt_fn is None else None,
    }


def translation_settings(model: Mapping[str, Any], limit: int | None) -> dict[str, Any]:
    """What decides a model's translation of a direction, besides the direction's sentences."""
    return {"model": model_settings(model), "limit": limit}


def plan_model(
    entry: Mapping[str, Any],
    folder: Path,
    limit: int | None,
    shards: Mapping[str, Sequence[Direction]] | None = None,
    home: Mapping[str, str] | None = None,
    price: Mapping[str, Any] | None = None,
    shards_setting: int | str | None = None,
) -> ModelPlan:
    """A model entry of the configuration, its outputs in `folder`; `home`: variables that
    its paths may name besides the environment's; `price`: its entry of `prices`;
    `shards_setting`: the configuration's `shards`, which its entry may override."""
    entry = dict(entry)
    provided = None
    if entry["translator"] == "provided":
        provided = expand_path(entry["path"], home)
        entry["path"] = str(provided)
    name = entry.get("name", folder.name)
    backend = BACKENDS.get(entry["translator"])
    arguments = translator_arguments(entry)
    api_key_env = arguments.get("api_key_env")
    weights = (entry["model"], entry.get("revision")) if backend and backend.hub_model else None
    return ModelPlan(
        name=name,
        entry=entry,
        folder=folder,
        translation_settings=translation_settings(entry, limit),
        provided=provided,
        gpus=model_gpus(entry),
        cpus=model_cpus(entry),
        environment=model_environment(entry),
        price=price,
        batch=is_batch(entry),
        shards=shards or {},
        translator=entry["translator"],
        arguments=arguments,
        operational=operational_settings(entry),
        prompt_fn=prompt_fn_spec(entry),
        prompt_kwargs=entry.get("prompt_kwargs"),
        api_key_env=api_key_env if isinstance(api_key_env, str) else None,
        api_key_setting="api_key_env" if backend else "translator_kwargs.api_key_env",
        weights=weights,
        hub_needs=tuple(model_hub_needs(name, weights, entry.get("engine_args") or {})),
        resources=entry.get("resources") or {},
        request_cache=folder / REQUEST_CACHE if backend and backend.request_cache else None,
        takes_limit=bool(backend and backend.takes_limit),
        fits_run=entry.get("shards", shards_setting) == AUTO,
    )


def model_hub_needs(
    name: str, weights: tuple[str, str | None] | None, engine_args: Mapping[str, Any]
) -> list[HubFiles]:
    """What a model's translate jobs load from the Hub: its config, tokenizer and weights at
    its revision, unless a local path, and the tokenizer its `engine_args` name (vllm)."""
    if weights is None:
        return []
    user = f"model '{name}'"
    model, revision = weights
    needs = [] if is_local(model) else [HubFiles(model, revision, user, parts=PARTS)]
    tokenizer = engine_args.get("tokenizer")
    if tokenizer and not is_local(tokenizer):
        revision = engine_args.get("tokenizer_revision")
        needs.append(
            HubFiles(tokenizer, revision, f"{user} engine_args.tokenizer", parts=("tokenizer",))
        )
    return needs


def file_in_the_way(folder: Path) -> Path | None:
    """The file that stands where `folder`, or a folder above it, is to be; None if none does
    (Snakemake would otherwise fail creating it, with a traceback naming no setting)."""
    for path in (folder, *folder.parents):
        if path.exists():
            return None if path.is_dir() else path
    return None


def refuse_files_as_folders(output_dir: Path, models: Sequence[ModelPlan] | Any) -> None:
    """Stop with one line when output_dir, or a model's folder in it, cannot be a folder."""
    folders = {"output_dir": output_dir}
    for model in models:
        folders[f"model '{model.name}': folder"] = model.folder
    for what, folder in folders.items():
        blocking = file_in_the_way(folder)
        if blocking is not None:
            within = "" if blocking == folder else f": '{blocking}'"
            raise ConfigError(f"{what} '{folder}'{within} is a file, not a folder")
