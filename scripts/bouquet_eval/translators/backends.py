"""The built-in translators, one record each: the single source of truth about them.

A model entry of the configuration names its translator and, for a built-in one, carries the
translator's settings beside `name` and `translator`. Everything about a built-in translator
follows from its `Backend` record here:
- the configuration schema of its entries (`model_entry_schema`: which settings, their types
  and defaults, which are required);
- which settings only change speed (`operational`), so that changing them makes nothing stale,
  and so what each setting can change (`Setting.changes`, bouquet_eval.planning.channel);
- the environment its jobs need (`environment`: envs/<name>.yaml), how many GPUs and how many
  CPUs (`cpus`, which decides how many jobs a local run overlaps);
- what a translate job hands it besides its settings (`request_cache`, `takes_limit`).
tests/test_backends.py checks each record against its translator's constructor (same names,
same defaults) and against config/README.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

_REQUIRED = "<required>"

_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]*$"
_SPEC_PATTERN = "^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"
_DEVICE_PATTERN = "^(auto|cpu|cuda(:[0-9]+)?)$"
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Setting:
    """One setting of a built-in translator."""

    schema: Mapping[str, Any]
    """JSON Schema of its value."""
    default: Any = _REQUIRED
    """The value used when the entry leaves it out; `_REQUIRED` when it may not."""
    operational: bool = False
    """It changes how fast translations come, not what they are."""
    also: tuple[str, ...] = ()
    """What else it can change (see `changes`): the run's shape (`jobs`: a folder of files that
    are the jobs' inputs decides their set of inputs), or the aggregates (the cost of a run
    through the Batch API)."""
    added: str | None = None
    """The release that added it, with a default that reproduces the earlier translations:
    left out of the settings that decide translations while it holds that default."""

    @property
    def required(self) -> bool:
        return self.default == _REQUIRED

    @property
    def changes(self) -> list[str]:
        """What it can change (the schema's `changes`, see bouquet_eval.planning.channel)."""
        return [*self.also, *([] if self.operational else ["translations"])]

    def leaves_out(self, value: Any) -> bool:
        """Whether `value` stays out of what decides translations (see `added`)."""
        return self.added is not None and not self.required and value == self.default


def _setting(
    schema: Mapping[str, Any],
    default: Any = _REQUIRED,
    operational: bool = False,
    description: str | None = None,
    also: tuple[str, ...] = (),
    added: str | None = None,
) -> Setting:
    """`description`: what it means, for the schema and config/README.md (`make docs`);
    `added`: the release that added it (see `Setting.added`)."""
    described = {**schema, **({"description": description} if description else {})}
    return Setting(MappingProxyType(described), default, operational, also, added)


@dataclass(frozen=True)
class Backend:
    factory: str
    """"package.module:Name" of the class built with the entry's settings."""
    settings: Mapping[str, Setting] = field(default_factory=dict)
    prompt_fn: str | None = None
    """Its own prompt function unless the entry names one; None: the default template."""
    takes_prompts: bool = True
    """False for translators that read whole rows (no prompt function applies)."""
    environment: str = "workflow"
    """The software environment of its jobs: envs/<environment>.yaml."""
    gpus_setting: str | None = None
    """The setting that says how many GPUs a job needs; None: `default_gpus`."""
    default_gpus: int = 0
    """GPUs when no setting says; 0 as well whenever its `device` setting is `cpu`."""
    bound: str = ""
    """"upper" or "lower" for a reference point rather than a model: reported as that bound of
    the scores, never ranked nor offered first in a menu."""
    cpus: int = 1
    """CPUs one of its translate jobs keeps busy (the job's threads, Slurm's CPUs per task): 1
    for a translator that copies, reads files or waits on a server, so that a local run
    overlaps its jobs; more where the CPU feeds a GPU or computes itself."""
    request_cache: bool = False
    """Its job hands it a folder where every paid answer is kept as it arrives."""
    takes_limit: bool = False
    """Its job hands it the run's `limit` (sentences per direction)."""
    hub_model: bool = False
    """Its `model` (at `revision`) is a Hugging Face hub id or a local folder of weights."""
    internal: tuple[str, ...] = ()
    """Arguments of its class that no configuration sets (their defaults apply)."""

    @property
    def operational(self) -> tuple[str, ...]:
        return tuple(name for name, setting in self.settings.items() if setting.operational)

    def defaults(self) -> dict[str, Any]:
        return {
            name: setting.default for name, setting in self.settings.items() if not setting.required
        }

    def gpus(self, settings: Mapping[str, Any]) -> int:
        if self.gpus_setting is not None:
            return int(settings.get(self.gpus_setting, self.settings[self.gpus_setting].default))
        if settings.get("device") == "cpu":
            return 0
        return self.default_gpus


_STRING = {"type": "string", "minLength": 1}
_OPTIONAL_STRING = {"type": ["string", "null"]}
_MODEL = {**_STRING, "description": "Hub id or folder of the model."}
_REVISION = {**_OPTIONAL_STRING, "description": "Hub revision (pin a commit)."}
_DTYPE = {"type": "string", "enum": list(DTYPES)}
_TEMPERATURE = _setting(
    {"type": "number", "minimum": 0}, 0.0, description="Sampling temperature (0: greedy)."
)
_SYSTEM_PROMPT = _setting(
    _OPTIONAL_STRING, None, description="A system message before each prompt."
)
_SEED = {"type": ["integer", "null"]}
_SEQ2SEQ_SETTINGS = {
    "model": _setting(_MODEL),
    "revision": _setting(_REVISION, None),
    # The report's timing counts the GPUs a model's jobs hold.
    "device": _setting(
        {"type": "string", "pattern": _DEVICE_PATTERN},
        "auto",
        operational=True,
        description="`auto` (a GPU when there is one), `cpu`, `cuda` or `cuda:N`.",
        also=("leaderboard",),
    ),
    "dtype": _setting(
        _DTYPE,
        "auto",
        description="`auto` (bfloat16 on a GPU, float32 on the CPU), `float32`, `bfloat16`, "
        "`float16`.",
    ),
    "batch_size": _setting(
        {"type": "integer", "minimum": 1},
        16,
        operational=True,
        description="Sentences per batch (sorted by length).",
    ),
    "num_beams": _setting(
        {"type": "integer", "minimum": 1}, 1, description="Beam size (1: greedy)."
    ),
    "max_new_tokens": _setting(
        {"type": "integer", "minimum": 1}, 256, description="Longest output, in tokens."
    ),
}
_SEQ2SEQ = "bouquet_eval.translators.hf_seq2seq"


def _seq2seq(
    name: str, prompt_fn: str | None = None, extra_settings: Mapping[str, Setting] | None = None
) -> Backend:
    """A Hugging Face seq2seq family: one GPU unless on the CPU, weights from the hub."""
    return Backend(
        f"{_SEQ2SEQ}:{name}",
        {**_SEQ2SEQ_SETTINGS, **(extra_settings or {})},
        prompt_fn=prompt_fn,
        environment="hf",
        default_gpus=1,
        # Tokenizing and batching for the GPU, or the model's own computation on the CPU.
        cpus=4,
        hub_model=True,
    )


BACKENDS: Mapping[str, Backend] = MappingProxyType(
    {
        "copy-source": Backend(
            "bouquet_eval.translators.bounds:CopySource", takes_prompts=False, bound="lower"
        ),
        "reference": Backend(
            "bouquet_eval.translators.bounds:Reference", takes_prompts=False, bound="upper"
        ),
        "provided": Backend(
            "bouquet_eval.translators.provided:ProvidedTranslations",
            # Its files are the translate and score jobs' inputs.
            {
                "path": _setting(
                    _STRING, description="The folder of `<src>-<tgt>.jsonl` files.", also=("jobs",)
                )
            },
            takes_prompts=False,
            takes_limit=True,
        ),
        "openai": Backend(
            "bouquet_eval.translators.openai_chat:OpenAIChatTranslator",
            {
                "model": _setting({**_STRING, "description": "The served model's name."}),
                "base_url": _setting(
                    _OPTIONAL_STRING,
                    None,
                    description="The endpoint (`null`: `OPENAI_BASE_URL`, else OpenAI's).",
                ),
                "api_key_env": _setting(
                    {"type": ["string", "null"], "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                    "OPENAI_API_KEY",
                    operational=True,
                    description="The *name* of the variable holding the key; `null` for "
                    "servers without keys.",
                ),
                "max_tokens": _setting(
                    {"type": ["integer", "null"], "minimum": 1},
                    None,
                    description="Longest answer, in tokens (`null`: the server's limit).",
                ),
                "temperature": _TEMPERATURE,
                "seed": _setting(
                    _SEED, 0, description="Sampling seed, where the server honours one."
                ),
                "system_prompt": _SYSTEM_PROMPT,
                "extra_body": _setting(
                    {"type": ["object", "null"]},
                    None,
                    description="Vendor parameters sent as they are (e.g. `top_k`, "
                    "`chat_template_kwargs`).",
                ),
                "concurrency": _setting(
                    {"type": "integer", "minimum": 1},
                    16,
                    operational=True,
                    description="Requests in flight at once.",
                ),
                "timeout": _setting(
                    {"type": "number", "exclusiveMinimum": 0},
                    60.0,
                    operational=True,
                    description="Seconds to wait for one answer.",
                ),
                "max_retries": _setting(
                    {"type": "integer", "minimum": 0},
                    6,
                    operational=True,
                    description="Attempts after the first for one prompt (in `batch` mode: "
                    "later batches for a request a batch did not answer).",
                ),
                # Both modes give the same answers from the same server, and share the cache;
                # the Batch API's discount changes what they cost.
                "mode": _setting(
                    {"type": "string", "enum": ["online", "batch"]},
                    "online",
                    operational=True,
                    also=("aggregates",),
                    description="`online`: one request per prompt, `concurrency` at a time; "
                    "`batch`: the Batch API (about half the price, answers within 24 hours; "
                    "see docs/api-models.md). Both give the same translations and share the "
                    "cache.",
                ),
                "batch_poll_interval": _setting(
                    {"type": "number", "exclusiveMinimum": 0},
                    30.0,
                    operational=True,
                    description="Seconds before the first look at new batches; the wait "
                    "doubles after each look, up to 5 minutes.",
                ),
                "batch_wait": _setting(
                    {"type": ["number", "null"], "minimum": 0},
                    None,
                    operational=True,
                    description="Seconds a translate job waits for its batches before it "
                    "stops, keeping what is done; the same command run later picks the batches "
                    "up. `null`: wait until they end.",
                ),
            },
            environment="api",
            request_cache=True,
            # Tests shorten the wait between attempts; a run waits as the server asks.
            internal=("retry_backoff",),
        ),
        "vllm": Backend(
            "bouquet_eval.translators.vllm_offline:VLLMTranslator",
            {
                "model": _setting(_MODEL),
                "revision": _setting(_REVISION, None),
                "tensor_parallel_size": _setting(
                    {"type": "integer", "minimum": 1},
                    1,
                    description="GPUs one copy of the model spans (and a translate job asks for).",
                    also=("leaderboard",),
                ),
                "dtype": _setting(
                    _DTYPE, "auto", description="`auto`, `float32`, `bfloat16` or `float16`."
                ),
                "max_model_len": _setting(
                    {"type": ["integer", "null"], "minimum": 1},
                    None,
                    description="Context length (`null`: the model's).",
                ),
                "gpu_memory_utilization": _setting(
                    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                    0.9,
                    operational=True,
                    description="Share of GPU memory vLLM may take.",
                ),
                "max_tokens": _setting(
                    {"type": "integer", "minimum": 1}, 512, description="Longest answer, in tokens."
                ),
                "temperature": _TEMPERATURE,
                "seed": _setting(_SEED, 0, description="Sampling seed."),
                "system_prompt": _SYSTEM_PROMPT,
                "deterministic": _setting(
                    {"type": "boolean"},
                    False,
                    description="Run-to-run reproducibility on the same hardware, at some speed.",
                ),
                "engine_args": _setting(
                    {"type": ["object", "null"]},
                    None,
                    description="Further arguments of `vllm.LLM`, passed as they are.",
                ),
            },
            environment="vllm",
            gpus_setting="tensor_parallel_size",
            # The engine's scheduler, tokenizing and detokenizing run beside the GPU.
            cpus=4,
            hub_model=True,
        ),
        "nllb": _seq2seq("NLLBTranslator", f"{_SEQ2SEQ}:nllb_prompt"),
        "madlad": _seq2seq("MadladTranslator", f"{_SEQ2SEQ}:madlad_prompt"),
        "aya": _seq2seq(
            "AyaTranslator",
            extra_settings={
                "allow_untrained_languages": _setting(
                    {"type": "boolean"},
                    False,
                    description="Also translate languages outside Aya-101's 101 training "
                    "languages.",
                )
            },
        ),
    }
)

ENTRY_PROPERTIES: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "name": {
            "description": "Names the output folder <output_dir>/<name>/.",
            "type": "string",
            "pattern": _NAME_PATTERN,
            "changes": ["jobs"],
        },
        "translator": {
            "description": (
                f"A built-in translator ({', '.join(BACKENDS)}) whose settings sit beside it "
                'in the entry, or "package.module:Name", a class or factory called with '
                "translator_kwargs."
            ),
            "type": "string",
            "anyOf": [{"enum": list(BACKENDS)}, {"pattern": _SPEC_PATTERN}],
            # The leaderboard reports a reference point's scores as a bound (`Backend.bound`).
            "changes": ["jobs", "translations", "leaderboard"],
        },
        "translator_kwargs": {
            "description": "Keyword arguments of a translator of your own.",
            "type": "object",
            "changes": ["translations"],
        },
        "prompt_fn": {
            "description": (
                '"package.module:name" of a function (src_lang, tgt_lang, src_text) -> prompt, '
                "or of a factory returning one when prompt_kwargs is given."
            ),
            "type": ["string", "null"],
            "pattern": _SPEC_PATTERN,
            "changes": ["translations"],
        },
        "prompt_kwargs": {"type": ["object", "null"], "changes": ["translations"]},
        "shards": {
            "description": "Overrides the top-level `shards` for this model.",
            "$ref": "#/$defs/shards",
            "changes": ["jobs"],
        },
        "gpus": {
            "description": "GPUs one translate job of this model needs (default: by translator).",
            "type": "integer",
            "minimum": 0,
            # The report's timing counts the GPUs a model's jobs hold.
            "changes": ["leaderboard"],
        },
        "resources": {
            "description": (
                "What this model's translate jobs ask for, over `resources.translate` key by key "
                "(partition, GPU type, memory, environment modules, ...)."
            ),
            "$ref": "#/$defs/job_resources",
        },
    }
)
"""The keys of a model entry that are the entry's own, whatever its translator."""

_PROMPT_KEYS = ("prompt_fn", "prompt_kwargs")
_CUSTOM_KEYS = ("translator_kwargs", *_PROMPT_KEYS)


def model_entry_schema() -> dict[str, Any]:
    """JSON Schema of a model entry, built from ENTRY_PROPERTIES and BACKENDS.

    An entry may hold only its own translator's settings; defaults are part of the schema, so
    that validation writes them into the entry and every setting is on record.
    """
    own_keys = [key for key in ENTRY_PROPERTIES if key not in _CUSTOM_KEYS]
    branches = []
    for name, backend in BACKENDS.items():
        allowed = [*own_keys, *(_PROMPT_KEYS if backend.takes_prompts else ()), *backend.settings]
        branches.append(
            {
                "if": {"properties": {"translator": {"const": name}}},
                "then": {
                    "required": [key for key, s in backend.settings.items() if s.required],
                    "properties": {
                        key: {
                            **setting.schema,
                            **({} if setting.required else {"default": setting.default}),
                            "changes": setting.changes,
                            **({"added": setting.added} if setting.added else {}),
                        }
                        for key, setting in backend.settings.items()
                    },
                    "propertyNames": {"enum": allowed},
                },
            }
        )
    branches.append(
        {
            "if": {"properties": {"translator": {"pattern": ":"}}},
            "then": {"propertyNames": {"enum": [*own_keys, *_CUSTOM_KEYS]}},
        }
    )
    every_setting = {key for backend in BACKENDS.values() for key in backend.settings}
    return {
        "type": "object",
        "required": ["name", "translator"],
        "properties": {
            **{key: dict(value) for key, value in ENTRY_PROPERTIES.items()},
            # Typed in the branch of the translator they belong to.
            **{key: {} for key in sorted(every_setting)},
        },
        "additionalProperties": False,
        "allOf": branches,
    }


def backend_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """A built-in translator's settings: the entry's keys that are not the entry's own."""
    return {key: value for key, value in model.items() if key not in ENTRY_PROPERTIES}


def deciding_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """What a model entry's translator is built with that decides its translations: its
    settings but those that only change speed (`operational`) and those a release added that
    hold the default that reproduces the earlier translations (`Setting.added`)."""
    backend = BACKENDS.get(model["translator"])
    arguments = translator_arguments(model)
    if backend is None:
        return arguments
    return {
        key: value
        for key, value in arguments.items()
        if not (key in backend.settings and backend.settings[key].operational)
        and not (key in backend.settings and backend.settings[key].leaves_out(value))
    }


def operational_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """What a model entry's translator is built with that changes only its speed."""
    backend = BACKENDS.get(model["translator"])
    operational = backend.operational if backend else ()
    return {key: value for key, value in translator_arguments(model).items() if key in operational}


def translator_arguments(model: Mapping[str, Any]) -> dict[str, Any]:
    """What the translator of a model entry is built with (besides its job context)."""
    if model["translator"] in BACKENDS:
        return backend_settings(model)
    return dict(model.get("translator_kwargs") or {})


def prompt_fn_spec(model: Mapping[str, Any]) -> str | None:
    """The prompt function of a model entry: its own, its backend's, or None for the default."""
    backend = BACKENDS.get(model["translator"])
    return model.get("prompt_fn") or (backend.prompt_fn if backend else None)


def model_gpus(model: Mapping[str, Any]) -> int:
    """GPUs one translate job of this model asks for."""
    if model.get("gpus") is not None:
        return int(model["gpus"])
    backend = BACKENDS.get(model["translator"])
    return backend.gpus(backend_settings(model)) if backend else 0


CUSTOM_TRANSLATOR_CPUS = 4
"""A translator of one's own may compute on the CPU: its jobs ask for as many as a model's."""


def model_cpus(model: Mapping[str, Any]) -> int:
    """CPUs one translate job of this model asks for, unless the configuration says."""
    backend = BACKENDS.get(model["translator"])
    return backend.cpus if backend else CUSTOM_TRANSLATOR_CPUS


def model_environment(model: Mapping[str, Any]) -> str:
    """The software environment (envs/<name>.yaml) of the model's translate jobs."""
    backend = BACKENDS.get(model["translator"])
    return backend.environment if backend else "workflow"


def bounds(models: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The reference points among model entries: name -> "upper" or "lower" (`Backend.bound`)."""
    found = {m["name"]: getattr(BACKENDS.get(m["translator"]), "bound", "") for m in models}
    return {name: bound for name, bound in found.items() if bound}
