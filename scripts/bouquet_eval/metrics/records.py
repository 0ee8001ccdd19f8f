"""The metrics, one record each: the single source of truth about them.

Everything about a built-in metric follows from its `MetricRecord` here: its per-sentence
columns and how they read (higher or lower is better, a fixed range, labels rather than
scores), the job it runs in (environment, CPUs, GPUs for its settings), the models `prefetch`
fetches and the manifest traces, the fields of its signature, the tolerance `verify` grants
it, whether it reads the reference, the languages its model was trained on, and its
configuration section's settings (the configuration schema's section of its name). A composite
(`CompositeRecord`) is a column computed from other metrics' columns.

A metric of one's own ("package.module:Name") gets a record from the class's attributes of
the same names, with defaults (`own_metric_record`). This module imports nothing heavy: the
planner, `prefetch` and the docs read it without loading a model.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from bouquet_eval.core.environment import cached_commit, hub_model
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.hub import HubFiles, is_local
from bouquet_eval.metrics.sonar_languages import SONAR_LANGUAGES, refusal
from bouquet_eval.metrics.training_languages import (
    MT5_LANGUAGES,
    XLMR_LANGUAGES,
    TrainingLanguages,
)


@dataclass(frozen=True)
class ModelFiles:
    """A model a metric loads, as one of its settings names it: a local path, or a Hugging Face
    hub repository (`parts` of it, see `hub.PARTS`), or one file of a repository."""

    setting: str
    """The setting that names it (`model`, `tokenizer`), for messages and the manifest."""
    spec: str
    revision: str | None = None
    parts: tuple[str, ...] = ()
    filename: str | None = None
    """For a single hub file: its name in the repository, `spec` being the repository."""

    @property
    def local(self) -> bool:
        """A path that exists is read from disk; anything else is on the hub."""
        return is_local(self.spec)


_HUB_FILE = re.compile(r"(?P<repo_id>[\w.-]+/[\w.-]+)/(?P<filename>[\w.-]+(?:/[\w.-]+)*)")


def hub_file(spec: str, what: str) -> tuple[str, str]:
    """`<owner>/<repo>/<filename>` -> (repository, filename); `what` names the setting."""
    match = _HUB_FILE.fullmatch(spec)
    if match is None:
        raise ValueError(
            f"{what} '{spec}' is neither an existing file nor a Hugging Face hub file of the "
            "form '<owner>/<repo>/<filename>'"
        )
    return match["repo_id"], match["filename"]


def _no_models(settings: Mapping[str, Any]) -> tuple[ModelFiles, ...]:
    return ()


DEFAULT_DECIMALS = 3
"""Decimal places of a metric's scores in the report's tables, where its record does not say."""


@dataclass(frozen=True)
class MetricRecord:
    name: str
    """The name `metrics` lists it by, and its configuration section's."""
    factory: str
    """"package.module:Name" of the class built with its configuration section."""
    summary: str
    """What it measures, in a few words (the docs' table of metrics)."""
    columns: tuple[str, ...]
    """The per-sentence columns it adds to the scored rows."""
    label_columns: tuple[str, ...] = ()
    """Columns holding labels rather than scores (left out of averages)."""
    lower_is_better: tuple[str, ...] = ()
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Columns with a fixed range: heatmaps of different models share its colour scale."""
    targets: Mapping[str, float] = field(default_factory=dict)
    """Columns whose best value is a target rather than the highest or the lowest (a length
    ratio's 1): the leaderboard ranks models by their distance to it."""
    decimals: int = DEFAULT_DECIMALS
    """Decimal places of its scores in the report's tables."""
    tolerances: Mapping[str, float] = field(default_factory=dict)
    """Largest difference `verify` accepts per scores.csv column (`<column>_corpus` too)."""
    corpus: bool = False
    """It has a corpus-level score (`<column>_corpus` in scores.csv)."""
    reference_free: bool = False
    """It never reads the reference."""
    qe_setting: str | None = None
    """A boolean setting that makes it reference-free (MetricX's `qe`)."""
    environment: str = "workflow"
    """The software environment of its score jobs: envs/<environment>.yaml."""
    modules: tuple[str, ...] = ()
    """The modules its score jobs import that its environment must hold: checked there before
    any job starts, where the run deploys no software itself."""
    device_setting: str | None = None
    """The setting naming its device: it holds a GPU unless that says `cpu`; None: no GPU."""
    cpus: int = 1
    """CPUs its job keeps busy when it computes on the CPU."""
    cpus_beside_gpu: int = 1
    """CPUs its job keeps busy while a GPU computes (tokenizing, batching)."""
    models: Callable[[Mapping[str, Any]], tuple[ModelFiles, ...]] = _no_models
    """The models it loads for its settings: what `prefetch` fetches and the manifest traces."""
    needs_once_fetched: Callable[[Mapping[str, Any]], list[HubFiles]] = lambda settings: []
    """What `prefetch` fetches next, known once `models` are in the cache (a COMET
    checkpoint's encoder, which its hparams.yaml names)."""
    signature_fields: tuple[str, ...] = ()
    """The fields of its signature (the `key` of each `key:value`)."""
    training_languages: TrainingLanguages | None = None
    """The languages its model was trained on; None: it has no learned model, or its coverage
    is known otherwise (`coverage`)."""
    coverage: str = ""
    """How its coverage of languages is known when no list says (the docs' table)."""
    refuses: Callable[[Mapping[str, Any], str], str | None] | None = None
    """Why it cannot score sentences of a language (a BOUQuET code) with its settings, None
    when it can: a direction with such a language is refused before any job starts."""
    licence: str = ""
    """The licence of its default model, where it has one."""
    settings: Mapping[str, Mapping[str, Any]] | None = None
    """JSON Schema of each setting of its configuration section (named as the metric), with
    its default and what it can change (`changes`: `[scores]` for what decides its scores,
    with `jobs` where it also moves its score jobs, as a device does; a setting added by a
    release names the release, `added`, see bouquet_eval.planning.channel): the configuration
    schema's section of it. None: it takes no settings, and the configuration has no section
    of its name."""

    def settings_schema(self) -> dict[str, Any]:
        """The configuration section's schema, from `settings`."""
        return {
            "description": f"Settings of {self.name} ({self.summary}), used when `metrics` "
            f"lists {self.name}.",
            "type": "object",
            "default": {},
            "additionalProperties": False,
            "properties": {
                key: copy.deepcopy(dict(value)) for key, value in (self.settings or {}).items()
            },
        }

    def gpus(self, settings: Mapping[str, Any] | None) -> int:
        if self.device_setting is None:
            return 0
        return 0 if (settings or {}).get(self.device_setting, "auto") == "cpu" else 1

    def job_cpus(self, settings: Mapping[str, Any] | None) -> int:
        return self.cpus_beside_gpu if self.gpus(settings) else self.cpus

    def is_reference_free(self, settings: Mapping[str, Any] | None) -> bool:
        return self.reference_free or bool(
            self.qe_setting and (settings or {}).get(self.qe_setting)
        )

    def family(self, settings: Mapping[str, Any] | None) -> str:
        """The score jobs it runs in: one per environment, on the CPU or with a GPU."""
        return f"{self.environment}_{'gpu' if self.gpus(settings) else 'cpu'}"

    @property
    def score_columns(self) -> tuple[str, ...]:
        return tuple(column for column in self.columns if column not in self.label_columns)

    @property
    def model_settings(self) -> tuple[str, ...]:
        """The settings that name a model it loads (a hub id, or a path): those of `models`."""
        defaults = {key: schema["default"] for key, schema in (self.settings or {}).items()}
        return tuple(dict.fromkeys(files.setting for files in self.models(defaults)))

    def flags(self) -> tuple[tuple[str, str], ...]:
        """Its command-line flags and the settings they set: `--<metric>-<setting>` for each
        model it loads, its device and its reference-free switch (`--blaser-qe-encoder`)."""
        settings = [*self.model_settings, self.device_setting, self.qe_setting]
        stem = self.name.replace("_", "-")
        return tuple(
            (f"--{stem}-{setting.replace('_', '-')}", setting) for setting in settings if setting
        )


@dataclass(frozen=True)
class CompositeRecord:
    """A column computed from other metrics' columns, added when all of them are computed."""

    column: str
    summary: str
    requires: tuple[str, ...]
    """The metrics whose columns it combines."""
    combine: Callable[[pd.DataFrame], Any]
    range: tuple[float, float] | None = None
    tolerance: float | None = None
    lower_is_better: bool = False
    target: float | None = None
    """Its best value, where that is neither the highest nor the lowest."""
    decimals: int = DEFAULT_DECIMALS

    def applies(self, metrics: Sequence[str]) -> bool:
        return set(self.requires) <= set(metrics)


_DEVICE_SETTING: Mapping[str, Any] = MappingProxyType(
    {
        "description": "auto (a GPU when there is one), cpu, cuda or cuda:N.",
        "type": "string",
        "pattern": "^(auto|cpu|cuda(:[0-9]+)?)$",
        "default": "auto",
        # Its precision follows the device, and its score jobs hold a GPU or not.
        "changes": ["jobs", "scores"],
    }
)
"""A `device` setting: the record's `device_setting`, which decides whether its job holds a
GPU."""


def _metricx_models(settings: Mapping[str, Any]) -> tuple[ModelFiles, ...]:
    return (
        ModelFiles("model", settings["model"], parts=("config", "weights")),
        # mT5's repository also holds its weights, in three formats: only the tokenizer.
        ModelFiles("tokenizer", settings["tokenizer"], parts=("tokenizer",)),
    )


def _glotlid_models(settings: Mapping[str, Any]) -> tuple[ModelFiles, ...]:
    spec, revision = settings["model"], settings.get("revision")
    if is_local(spec):
        return (ModelFiles("model", spec),)
    repo_id, filename = hub_file(spec, "GlotLID model")
    return (ModelFiles("model", repo_id, revision, filename=filename),)


def _comet_models(settings: Mapping[str, Any]) -> tuple[ModelFiles, ...]:
    """A checkpoint folder, or its Hub repository's hparams.yaml and checkpoints/model.ckpt."""
    spec = settings["model"]
    if is_local(spec):
        return (ModelFiles("model", spec),)
    return tuple(
        ModelFiles("model", spec, filename=name)
        for name in ("checkpoints/model.ckpt", "hparams.yaml")
    )


def _comet_encoder(name: str) -> Callable[[Mapping[str, Any]], list[HubFiles]]:
    """Its encoder's tokenizer and config, which the fetched hparams.yaml names."""

    def needs(settings: Mapping[str, Any]) -> list[HubFiles]:
        from bouquet_eval.metrics import load_metric

        need = load_metric(name, dict(settings)).encoder_need()  # type: ignore[attr-defined]
        return [] if need is None else [need]

    return needs


def _comet(
    name: str,
    factory: str,
    summary: str,
    default_model: str,
    columns: tuple[str, ...] = (),
    tolerance: float = 2e-3,
    licence: str = "CC BY-NC-SA 4.0",
    **facts: Any,
) -> MetricRecord:
    """A metric of the COMET family: unbabel-comet in its own environment, a GPU unless
    `device: cpu`, one checkpoint whose encoder was pretrained on XLM-R's languages."""
    return MetricRecord(
        name,
        f"bouquet_eval.metrics.comet:{factory}",
        summary,
        (name, *columns),
        # Against our float32 on the CPU: float16 (comet-score's own) within 9.5e-4, bfloat16
        # within 1.2e-2 (xCOMET; COMET-22 6.5e-3), on tiny checkpoints (docs/metrics-comet.md).
        tolerances={name: tolerance},
        environment="comet",
        modules=("comet", "torch"),
        device_setting="device",
        # The model's own computation on the CPU; batching and tokenizing beside a GPU.
        cpus=4,
        cpus_beside_gpu=2,
        models=_comet_models,
        needs_once_fetched=_comet_encoder(name),
        signature_fields=("model", "commit", "precision", "comet", "transformers"),
        training_languages=XLMR_LANGUAGES,
        licence=licence,
        settings={
            "model": {
                "description": "Hub id of a COMET checkpoint, or a folder laid out like one "
                "(checkpoints/model.ckpt and hparams.yaml).",
                "type": "string",
                "minLength": 1,
                "default": default_model,
                "changes": ["scores"],
            },
            "batch_tokens": {
                "description": "Tokens per batch (segments times the longest one's tokens, "
                "every field counted): batches sorted by length and sized by tokens. null: "
                "comet-score's batches of batch_size, in the order of the sources' lengths.",
                "type": ["integer", "null"],
                "minimum": 1,
                "default": 16384,
                "changes": ["scores"],
            },
            "batch_size": {
                "description": "Segments per batch where batch_tokens is null.",
                "type": "integer",
                "minimum": 1,
                "default": 16,
                "changes": ["scores"],
            },
            "device": _DEVICE_SETTING,
            "precision": {
                "description": "auto (bfloat16 on a GPU that has it, float32 on the CPU), "
                "float32, bfloat16 or float16 (comet-score's own).",
                "type": "string",
                "enum": ["auto", "float32", "bfloat16", "float16"],
                "default": "auto",
                "changes": ["scores"],
            },
        },
        **facts,
    )


def _blaser_models(settings: Mapping[str, Any]) -> tuple[ModelFiles, ...]:
    """The SONAR text encoder's checkpoint and tokenizer, and the BLASER checkpoint: each a
    local folder, or those files of a Hub repository."""
    from bouquet_eval.metrics.blaser import CHECKPOINT_FILE, ENCODER_FILES

    models = []
    for setting, files in (("encoder", ENCODER_FILES), ("checkpoint", (CHECKPOINT_FILE,))):
        spec = settings[setting]
        if is_local(spec):
            models.append(ModelFiles(setting, spec))
        else:
            models += [ModelFiles(setting, spec, filename=name) for name in files]
    return tuple(models)


def _blaser_refuses(settings: Mapping[str, Any], code: str) -> str | None:
    return refusal(code, settings.get("languages") or {})


def _blaser(name: str, factory: str, summary: str, checkpoint: str, **facts: Any) -> MetricRecord:
    """A form of BLASER 2.0: sonar-space in its own environment, a GPU unless `device: cpu`,
    SONAR's text encoder and a BLASER checkpoint."""
    from bouquet_eval.metrics.blaser import DEFAULT_BATCH_SIZE, DEFAULT_ENCODER

    return MetricRecord(
        name,
        f"bouquet_eval.metrics.blaser:{factory}",
        summary,
        (name,),
        ranges={name: (1, 5)},
        # bfloat16 against float32 (docs/metrics-blaser.md); float32 on two machines agree
        # to about 1e-6.
        tolerances={name: 0.05},
        environment="blaser",
        modules=("sonar", "fairseq2", "torch"),
        device_setting="device",
        # The encoder's computation on the CPU; tokenizing and batching beside a GPU.
        cpus=4,
        cpus_beside_gpu=2,
        models=_blaser_models,
        signature_fields=(
            "encoder",
            "encoder_commit",
            "checkpoint",
            "checkpoint_commit",
            "dtype",
            "sonar",
            "fairseq2",
        ),
        training_languages=SONAR_LANGUAGES,
        refuses=_blaser_refuses,
        licence="CC BY-NC 4.0",
        settings={
            "encoder": {
                "description": "Hub repository of the SONAR text encoder (sonar_text_encoder.pt "
                "and sentencepiece.source.256000.model), or a local folder holding them.",
                "type": "string",
                "minLength": 1,
                "default": DEFAULT_ENCODER,
                "changes": ["scores"],
            },
            "checkpoint": {
                "description": "Hub repository of the BLASER 2.0 checkpoint (model.pt), or a "
                "local folder holding it.",
                "type": "string",
                "minLength": 1,
                "default": checkpoint,
                "changes": ["scores"],
            },
            "batch_size": {
                "description": "Sentences per batch of the encoder (sorted by length).",
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_BATCH_SIZE,
                "changes": ["scores"],
            },
            "device": _DEVICE_SETTING,
            "dtype": {
                "description": "auto (bfloat16 on a GPU, float32 on the CPU), float32, "
                "bfloat16 or float16: the encoder's (BLASER itself runs in float32).",
                "type": "string",
                "enum": ["auto", "float32", "bfloat16", "float16"],
                "default": "auto",
                "changes": ["scores"],
            },
            "languages": {
                "description": "BOUQuET codes (with or without glottocode) -> the SONAR code to "
                "encode their sentences with, for languages SONAR has no code of its own for "
                "(docs/metrics-blaser.md); scores on them are flagged unseen.",
                "type": "object",
                "additionalProperties": {"type": "string", "pattern": "^[a-z]{3}_[A-Z][a-z]{3}$"},
                "default": {},
                "changes": ["scores"],
            },
        },
        **facts,
    )


SHARED_ENVIRONMENTS = ("workflow", "metrics")
"""The environments of the workflow's own pins (pyproject.toml's; `metrics` adds its `hf` and
`lid` extras); a metric whose packages cannot live beside them has one of its own."""

# chrF++ and BLEU are deterministic: only the last digits of a floating-point sum may differ.
_EXACT = 1e-9
_SACREBLEU_SIGNATURE = ("nrefs", "case", "eff", "version")

RECORDS: Mapping[str, MetricRecord] = MappingProxyType(
    {
        "chrf": MetricRecord(
            "chrf",
            "bouquet_eval.metrics.chrf:ChrF",
            "chrF++: character n-gram F-score with word bigrams (sacreBLEU)",
            ("chrfpp",),
            ranges={"chrfpp": (0, 100)},
            decimals=2,
            tolerances={"chrfpp": _EXACT, "chrfpp_corpus": _EXACT},
            corpus=True,
            signature_fields=(*_SACREBLEU_SIGNATURE, "nc", "nw", "space"),
        ),
        "bleu": MetricRecord(
            "bleu",
            "bouquet_eval.metrics.bleu:BLEU",
            "BLEU, tokenizer 13a (sacreBLEU)",
            ("bleu",),
            ranges={"bleu": (0, 100)},
            decimals=2,
            tolerances={"bleu": _EXACT, "bleu_corpus": _EXACT},
            corpus=True,
            signature_fields=(*_SACREBLEU_SIGNATURE, "tok", "smooth"),
        ),
        "ter": MetricRecord(
            "ter",
            "bouquet_eval.metrics.ter:TER",
            "translation edit rate x 100, can exceed 100 (sacreBLEU)",
            ("ter",),
            lower_is_better=("ter",),
            decimals=2,
            tolerances={"ter": _EXACT, "ter_corpus": _EXACT},
            corpus=True,
            signature_fields=("nrefs", "case", "tok", "norm", "punct", "asian", "version"),
        ),
        "metricx": MetricRecord(
            "metricx",
            "bouquet_eval.metrics.metricx:MetricX",
            "MetricX-24: an mT5 regression model's error score, 0 (best) to 25",
            ("metricx",),
            lower_is_better=("metricx",),
            ranges={"metricx": (0, 25)},
            decimals=2,
            # bfloat16 on a GPU against float32 on a CPU: about 0.001 apart per segment
            # (google-research/metricx).
            tolerances={"metricx": 0.01},
            qe_setting="qe",
            environment="metrics",
            modules=("torch", "transformers", "tokenizers", "sentencepiece"),
            device_setting="device",
            cpus=4,
            cpus_beside_gpu=2,
            models=_metricx_models,
            signature_fields=(
                "model",
                "tokenizer",
                "qe",
                "maxlen",
                "tokenization",
                "dtype",
                "tokenizers",
                "transformers",
            ),
            training_languages=MT5_LANGUAGES,
            licence="Apache-2.0",
            settings={
                "model": {
                    "description": "Hub id or folder of a MetricX-24 checkpoint; the "
                    "-bfloat16, large and xxl variants work too.",
                    "type": "string",
                    "default": "google/metricx-24-hybrid-xl-v2p6",
                    "changes": ["scores"],
                },
                "tokenizer": {
                    "description": "mT5's tokenizer, for every size: a Hub id or a folder with "
                    "spiece.model (and tokenizer_config.json), from which the official "
                    "pipeline's tokenizer is built (docs/architecture.md, MetricX-24).",
                    "type": "string",
                    "default": "google/mt5-xl",
                    "changes": ["scores"],
                },
                "qe": {
                    "description": "Reference-free (quality estimation) scoring: source and "
                    "candidate only.",
                    "type": "boolean",
                    "default": False,
                    "changes": ["scores"],
                },
                "device": _DEVICE_SETTING,
                "dtype": {
                    "description": "auto (bfloat16 on a GPU, float32 on the CPU), float32, "
                    "bfloat16 or float16.",
                    "type": "string",
                    "enum": ["auto", "float32", "bfloat16", "float16"],
                    "default": "auto",
                    "changes": ["scores"],
                },
                "batch_tokens": {
                    "description": "Token budget of a batch: segments are sorted by length and "
                    "batched up to it (batch size x longest length). On an H100, XL in "
                    "bfloat16: 395 segments/s at 16384, within 4% of the fastest budget (32768, "
                    "408/s), with a peak of 13 GiB against 20; 17/s one segment at a time as "
                    "the official script does (benchmarks/gpu_results.md). Lower it on GPUs "
                    "under 24 GB; memory grows with it and with the longest input.",
                    "type": "integer",
                    "minimum": 1,
                    "default": 16384,
                    "changes": ["scores"],
                },
            },
        ),
        "glotlid": MetricRecord(
            "glotlid",
            "bouquet_eval.metrics.glotlid:GlotLID",
            "GlotLID: the probability that the translation is in its target language",
            ("glotlid_pred", "glotlid_score"),
            label_columns=("glotlid_pred",),
            ranges={"glotlid_score": (0, 1)},
            # Its probabilities move with the fastText build.
            tolerances={"glotlid_score": 1e-4},
            reference_free=True,
            environment="metrics",
            modules=("fasttext",),
            models=_glotlid_models,
            signature_fields=("model", "rev", "remap", "fasttext"),
            coverage="its model's labels: NaN glotlid_score for a language without one",
            licence="Apache-2.0",
            settings={
                "model": {
                    "description": "A local fastText .bin file, or <owner>/<repo>/<file> on "
                    "the Hugging Face hub.",
                    "type": "string",
                    "default": "cis-lmu/glotlid/model_v3.bin",
                    "changes": ["scores"],
                },
                "revision": {
                    "description": "Hub revision of the model file (a pinned commit for "
                    "reproducibility).",
                    "type": ["string", "null"],
                    "default": None,
                    "changes": ["scores"],
                },
            },
        ),
        "comet": _comet(
            "comet",
            "CometMetric",
            "COMET-22: a regression score from source, translation and reference",
            "Unbabel/wmt22-comet-da",
            licence="Apache-2.0",
        ),
        "cometkiwi": _comet(
            "cometkiwi",
            "CometKiwi",
            "CometKiwi: COMET's quality estimation, from source and translation alone",
            "Unbabel/wmt22-cometkiwi-da",
            reference_free=True,
        ),
        "xcomet": _comet(
            "xcomet",
            "XComet",
            "xCOMET: a score, and the error spans it marks in each translation",
            "Unbabel/XCOMET-XL",
            columns=("xcomet_error_spans",),
            label_columns=("xcomet_error_spans",),
            ranges={"xcomet": (0, 1)},
            tolerance=2.5e-2,
        ),
        "blaser": _blaser(
            "blaser",
            "Blaser",
            "BLASER 2.0: a score from SONAR embeddings of source, translation and reference",
            "facebook/blaser-2.0-ref",
        ),
        "blaser_qe": _blaser(
            "blaser_qe",
            "BlaserQE",
            "BLASER 2.0 quality estimation: from SONAR embeddings of source and translation",
            "facebook/blaser-2.0-qe",
            reference_free=True,
        ),
    }
)


def _glotlid_x_metricx(scored: pd.DataFrame) -> Any:
    return scored["glotlid_score"] * (1 - np.sqrt(scored["metricx"] / 25))


COMPOSITES: Mapping[str, CompositeRecord] = MappingProxyType(
    {
        "glotlid_x_metricx": CompositeRecord(
            "glotlid_x_metricx",
            "glotlid_score x (1 - sqrt(metricx / 25)): 1 for the right language and no error",
            ("metricx", "glotlid"),
            _glotlid_x_metricx,
            range=(0, 1),
            tolerance=1e-3,
        ),
    }
)

PRIMARY_PREFERENCE = ("glotlid_x_metricx", "metricx", "chrfpp")
"""The leaderboard ranks models by the first of these columns that was computed."""


def builtin_ranges() -> dict[str, tuple[float, float]]:
    """The fixed ranges of every built-in metric's and composite's columns."""
    return MetricSet.of(list(RECORDS), {}).ranges() | {
        c.column: c.range for c in COMPOSITES.values() if c.range is not None
    }


def builtin_decimals() -> dict[str, int]:
    """The decimal places of every built-in metric's and composite's score columns."""
    return MetricSet.of(list(RECORDS), {}).decimals() | {
        c.column: c.decimals for c in COMPOSITES.values()
    }


def builtin_lower_is_better() -> frozenset[str]:
    """The columns of built-in metrics and composites where lower is better."""
    own = MetricSet.of(list(RECORDS), {}).lower_is_better()
    return own | {c.column for c in COMPOSITES.values() if c.lower_is_better}


OWN_METRIC_CPUS = 2
"""A metric of one's own that does not say: as many as score jobs asked for before they
followed their metrics."""


def own_metric_record(spec: str, metric: Any) -> MetricRecord:
    """The record of a metric of one's own, from attributes of its class or instance named as
    `MetricRecord`'s fields (`environment`, `gpus`, `cpus`, `lower_is_better`, ...), with
    `reference_free_columns` naming reference-free columns and `tolerances` its own."""
    columns = tuple(metric.columns)
    free = set(getattr(metric, "reference_free_columns", ()))
    gpus = int(getattr(metric, "gpus", 0))
    return MetricRecord(
        spec,
        spec,
        (type(metric).__doc__ or spec).strip().splitlines()[0],
        columns,
        label_columns=tuple(getattr(metric, "label_columns", ())),
        lower_is_better=tuple(getattr(metric, "lower_is_better", ())),
        ranges=dict(getattr(metric, "ranges", {})),
        targets=dict(getattr(metric, "targets", {})),
        decimals=int(getattr(metric, "decimals", DEFAULT_DECIMALS)),
        tolerances=dict(getattr(metric, "tolerances", {})),
        corpus=hasattr(metric, "corpus_score"),
        reference_free=bool(columns) and free >= set(columns),
        environment=str(getattr(metric, "environment", "workflow")),
        # A GPU is asked for through the `device` convention: on unless the device is cpu.
        device_setting="device" if gpus else None,
        cpus=int(getattr(metric, "cpus", OWN_METRIC_CPUS)),
        cpus_beside_gpu=int(getattr(metric, "cpus", OWN_METRIC_CPUS)),
    )


def record_of(name: str, metric: Any = None) -> MetricRecord:
    """A built-in metric's record, or that of a metric of one's own (given as loaded)."""
    if name in RECORDS:
        return RECORDS[name]
    if metric is None:
        from bouquet_eval.core.config import import_object

        metric = import_object(name)
    return own_metric_record(name, metric)


@dataclass(frozen=True)
class MetricSet:
    """The metrics of a run, with their settings: what every consumer asks of them."""

    names: tuple[str, ...]
    settings: Mapping[str, Mapping[str, Any]]
    records: tuple[MetricRecord, ...]

    @classmethod
    def of(
        cls, names: Sequence[str], config: Mapping[str, Any], loaded: Sequence[Any] = ()
    ) -> MetricSet:
        """`loaded`: the metric objects, where the caller has them (own metrics' records)."""
        objects = dict(zip(names, loaded, strict=False))
        return cls(
            tuple(names),
            MappingProxyType({name: config.get(name) or {} for name in names}),
            tuple(record_of(name, objects.get(name)) for name in names),
        )

    @classmethod
    def of_loaded(cls, metrics: Sequence[Any]) -> MetricSet:
        """The set of loaded metrics, where only how their columns read matters (a metric's
        settings change only its job and whether it reads the reference)."""
        names = [
            metric.name
            if metric.name in RECORDS
            else f"{type(metric).__module__}:{type(metric).__qualname__}"
            for metric in metrics
        ]
        # The settings that change how its columns read, as the loaded metric holds them.
        settings = {}
        for name, metric in zip(names, metrics, strict=True):
            record = record_of(name, metric)
            keys = (record.qe_setting, record.device_setting)
            settings[name] = {k: getattr(metric, k) for k in keys if k and hasattr(metric, k)}
        return cls.of(names, settings, metrics)

    def record(self, name: str) -> MetricRecord:
        return self.records[self.names.index(name)]

    @cached_property
    def composites(self) -> tuple[CompositeRecord, ...]:
        return tuple(c for c in COMPOSITES.values() if c.applies(self.names))

    def columns(self) -> list[str]:
        """Every per-sentence column, composites last."""
        own = [column for record in self.records for column in record.columns]
        return own + [composite.column for composite in self.composites]

    def score_columns(self) -> list[str]:
        labels = {column for record in self.records for column in record.label_columns}
        return [column for column in self.columns() if column not in labels]

    def lower_is_better(self) -> frozenset[str]:
        own = {column for record in self.records for column in record.lower_is_better}
        return frozenset(own | {c.column for c in self.composites if c.lower_is_better})

    def targets(self) -> dict[str, float]:
        """Per column whose best value is a target (neither the highest nor the lowest): it."""
        targets = {column: t for record in self.records for column, t in record.targets.items()}
        targets.update({c.column: c.target for c in self.composites if c.target is not None})
        return targets

    def decimals(self) -> dict[str, int]:
        """Per score column, its decimal places in the report's tables."""
        places = {
            column: record.decimals for record in self.records for column in record.score_columns
        }
        places.update({c.column: c.decimals for c in self.composites})
        return places

    def ranges(self) -> dict[str, tuple[float, float]]:
        ranges = {column: r for record in self.records for column, r in record.ranges.items()}
        ranges.update({c.column: c.range for c in self.composites if c.range is not None})
        return ranges

    def tolerances(self) -> dict[str, float]:
        tolerances = {
            column: value for record in self.records for column, value in record.tolerances.items()
        }
        tolerances.update(
            {c.column: c.tolerance for c in self.composites if c.tolerance is not None}
        )
        return tolerances

    def reference_free_columns(self) -> set[str]:
        free = {
            column
            for name, record in zip(self.names, self.records, strict=True)
            if record.is_reference_free(self.settings[name])
            for column in record.columns
        }
        # A composite reads the reference when any metric it combines does.
        for composite in self.composites:
            if all(
                self.record(name).is_reference_free(self.settings[name])
                for name in composite.requires
            ):
                free.add(composite.column)
        return free

    def families(self) -> dict[str, tuple[str, ...]]:
        """Score job families -> their metrics, in the order `metrics` lists them."""
        families: dict[str, list[str]] = {}
        for name, record in zip(self.names, self.records, strict=True):
            families.setdefault(record.family(self.settings[name]), []).append(name)
        return {family: tuple(names) for family, names in families.items()}

    def gathered_in_score_jobs(self) -> bool:
        """Whether the score jobs write the scored files themselves: where the metrics are one
        family, a job of its own to gather them would only read back what they had at hand."""
        return len(self.families()) == 1

    def family_environment(self, family: str) -> str:
        return self.record(self.families()[family][0]).environment

    def modules(self, names: Sequence[str]) -> list[str]:
        """The modules the score jobs of the metrics `names` import (their records')."""
        return list(dict.fromkeys(m for name in names for m in self.record(name).modules))

    def joint_environment(self) -> str:
        """The environment of a job that computes all of them (verification): the first of
        their own environments (COMET's) when any runs in one, which then needs the others'
        packages beside its own (COMET's has the workflow's: chrF++, BLEU and TER run there
        too); else `metrics` when any runs there; else `workflow`."""
        environments = [record.environment for record in self.records]
        own = [name for name in environments if name not in SHARED_ENVIRONMENTS]
        if own:
            return own[0]
        return "metrics" if "metrics" in environments else "workflow"

    def family_gpus(self, family: str) -> int:
        return max(self.record(name).gpus(self.settings[name]) for name in self.families()[family])

    def family_cpus(self, family: str) -> int:
        return max(
            self.record(name).job_cpus(self.settings[name]) for name in self.families()[family]
        )

    def models(self) -> list[tuple[str, ModelFiles]]:
        """(metric, model) for every model the metrics load, in order."""
        return [
            (name, files)
            for name, record in zip(self.names, self.records, strict=True)
            for files in record.models(self.settings[name])
        ]

    def hub_needs(self) -> list[HubFiles]:
        """What `prefetch` fetches for them: the models that are not local files."""
        return [
            HubFiles(files.spec, files.revision, f"{name}.{files.setting}", files.parts,
                     files.filename)
            for name, files in self.models()
            if not files.local
        ]  # fmt: skip

    def needs_once_fetched(self) -> list[HubFiles]:
        return [
            need
            for name, record in zip(self.names, self.records, strict=True)
            for need in record.needs_once_fetched(self.settings[name])
        ]

    def provenance(self) -> dict[str, Any]:
        """Where their models came from, for the manifest: a local path, or a hub repository
        (and file) and the commit its revision resolved to in the local cache."""
        sources: dict[str, Any] = {}
        for name, files in self.models():
            key = f"{name}.{files.setting}"
            if files.local:
                sources[key] = {"path": str(Path(files.spec).expanduser().resolve())}
            elif files.filename is not None:
                # A repository's first file stands for it (a COMET checkpoint's model.ckpt).
                sources.setdefault(
                    key,
                    {
                        "hub": files.spec,
                        "file": files.filename,
                        "revision": files.revision,
                        "commit": cached_commit(files.spec, files.revision),
                    },
                )
            else:
                sources[key] = hub_model(files.spec, files.revision)
        return sources

    def uncovered(self, src_lang: str, tgt_lang: str) -> list[str]:
        """The learned metrics whose model never saw this direction's target language (nor,
        reference-free, its source language)."""
        names = []
        for name, record in zip(self.names, self.records, strict=True):
            languages = record.training_languages
            if languages is None:
                continue
            read = [tgt_lang]
            if record.is_reference_free(self.settings[name]):
                read.append(src_lang)
            if not all(languages.covers(code) for code in read):
                names.append(name)
        return names

    def refused(self, directions: Sequence[Direction]) -> list[str]:
        """Per metric that cannot score some of `directions` with its settings (its record's
        `refuses`), one line naming each language at fault and the directions it is in."""
        lines = []
        for name, record in zip(self.names, self.records, strict=True):
            if record.refuses is None:
                continue
            settings = self.settings[name]
            reasons: dict[str, str | None] = {}
            refused: dict[str, list[str]] = {}
            for direction in directions:
                for code in (direction.src_lang, direction.tgt_lang):
                    if code not in reasons:
                        reasons[code] = record.refuses(settings, code)
                    if reasons[code] is not None:
                        refused.setdefault(code, []).append(direction.name)
            if refused:
                count = len({d for names in refused.values() for d in names})
                causes = "; ".join(
                    f"{reasons[code]} ({_some(names)})" for code, names in refused.items()
                )
                remedy = "leave them out of `directions`"
                if "languages" in (record.settings or {}):
                    remedy += f" or map their languages with `{name}.languages`"
                lines.append(f"{name} cannot score {count} direction(s): {causes}; {remedy}")
        return lines

    def learned(self) -> list[str]:
        return [
            name
            for name, record in zip(self.names, self.records, strict=True)
            if record.training_languages is not None
        ]

    def trained_columns(self, src_lang: str, tgt_lang: str) -> dict[str, bool]:
        """Per score column of a learned metric (or of a composite of one): whether its model
        (every one, for a composite) was trained on this direction's languages, as
        `uncovered` reads them."""
        learned, unseen = set(self.learned()), set(self.uncovered(src_lang, tgt_lang))
        trained = {
            column: name not in unseen
            for name, record in zip(self.names, self.records, strict=True)
            if name in learned
            for column in record.score_columns
        }
        for composite in self.composites:
            if learned & set(composite.requires):
                trained[composite.column] = not unseen & set(composite.requires)
        return trained


def _some(names: Sequence[str], shown: int = 3) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
