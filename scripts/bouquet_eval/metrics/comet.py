"""The COMET family through unbabel-comet: COMET-22, CometKiwi and xCOMET sentence scores.

Each metric loads one checkpoint with unbabel-comet's own `load_from_checkpoint` (once per
job, on its first `score` call) and scores with the model's own `predict`, which batches
sentences by length and returns them in the rows' order; so its scores are those of
unbabel-comet's `comet-score` at the same precision. xCOMET also gives each sentence's error
spans (text, start and end characters in the translation, severity, confidence).

`model` is a Hub repository id (read from the local cache only: `prefetch` fills it) or a
local folder laid out like one: `checkpoints/model.ckpt` and `hparams.yaml`. The checkpoint
holds all the weights; its encoder (`pretrained_model` in hparams.yaml, e.g.
xlm-roberta-large) lends only its tokenizer and config, which `prefetch` fetches alone.

unbabel-comet needs transformers 4 and numpy 1, which the rest of the project's pins exclude:
it runs in an environment of its own (envs/comet-requirements.txt, docs/metrics-comet.md).
torch and comet are imported only when a model is loaded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from bouquet_eval.core.devices import resolve_device
from bouquet_eval.core.environment import cached_commit
from bouquet_eval.data.hub import HubFiles, is_local, model_folder
from bouquet_eval.metrics.metricx import token_budget_batches

log = logging.getLogger(__name__)

PRECISIONS = ("float32", "bfloat16", "float16")
CHECKPOINT = "checkpoints/model.ckpt"
HPARAMS = "hparams.yaml"
CHECKPOINT_FILES = (HPARAMS, CHECKPOINT)
# unbabel-comet's `comet-score` default, for batches of a fixed size (`batch_tokens: null`).
DEFAULT_BATCH_SIZE = 16
# Tokens per batch (its segments times the longest one's tokens, every field counted): the
# default, as MetricX's; benchmarks/comet_gpu.py measures others.
DEFAULT_BATCH_TOKENS = 16384
# Lightning and unbabel-comet announce their set-up and services while a checkpoint loads.
QUIET_LOGGERS = ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "comet")


def checkpoint_folder(model: str) -> Path:
    """The folder holding `checkpoints/model.ckpt` and `hparams.yaml`: `model` itself when it
    is a local folder, else its snapshot in the Hugging Face cache (never the network)."""
    return model_folder(
        model,
        CHECKPOINT_FILES,
        "COMET checkpoint",
        hint=f"a COMET model folder holds {CHECKPOINT} and {HPARAMS}, as its Hub repository does",
    )


def encoder_name(hparams: Path) -> str:
    """The encoder a checkpoint's hparams.yaml names (`pretrained_model`)."""
    import yaml

    return str(yaml.safe_load(hparams.read_text(encoding="utf-8"))["pretrained_model"])


def resolve_precision(precision: str, device: str) -> str:
    """bfloat16 on a GPU that supports it, else float32; an explicit precision is kept."""
    if precision != "auto":
        return precision
    device = resolve_device(device)
    if not device.startswith("cuda"):
        return "float32"
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "missing"


@dataclass(frozen=True)
class ErrorSpan:
    """One error xCOMET marks in a translation; `start` and `end` are character offsets."""

    text: str
    start: int
    end: int
    severity: str
    confidence: float


class CometMetric:
    """A COMET-family metric: one column of sentence scores, higher is better."""

    name = "comet"
    columns: tuple[str, ...] = ("comet",)
    default_model = "Unbabel/wmt22-comet-da"
    uses_reference = True

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "auto",
        precision: str = "auto",
        batch_tokens: int | None = DEFAULT_BATCH_TOKENS,
    ) -> None:
        if precision not in ("auto", *PRECISIONS):
            raise ValueError(
                f"{self.name} precision must be 'auto' or one of {PRECISIONS}, not '{precision}'"
            )
        if batch_size < 1:
            raise ValueError(f"{self.name} batch_size must be positive, not {batch_size}")
        if batch_tokens is not None and batch_tokens < 1:
            raise ValueError(f"{self.name} batch_tokens must be positive, not {batch_tokens}")
        self.model_name = str(model or self.default_model)
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.device = device
        self.precision = precision
        self._model: Any = None

    # What `prefetch` fetches, in two steps: the checkpoint's files, then its encoder's.
    def checkpoint_needs(self) -> list[HubFiles]:
        """The checkpoint repository's hparams.yaml and model.ckpt (nothing for a local folder)."""
        if is_local(self.model_name):
            return []
        needed_by = f"{self.name}.model"
        return [
            HubFiles(self.model_name, None, needed_by, filename=name) for name in CHECKPOINT_FILES
        ]

    def encoder_need(self) -> HubFiles | None:
        """Only the tokenizer and config of the encoder the checkpoint's hparams.yaml names
        (its weights are in the checkpoint); None when the encoder is a local folder. Reads
        hparams.yaml from the local folder or the cache: call it once `checkpoint_needs` are
        fetched."""
        encoder = encoder_name(checkpoint_folder(self.model_name) / HPARAMS)
        if is_local(encoder):
            return None
        return HubFiles(encoder, None, f"{self.name}.model encoder", parts=("tokenizer",))

    def resolved_precision(self) -> str:
        return resolve_precision(self.precision, self.device)

    def signature(self) -> str:
        if is_local(self.model_name):
            commit = "local"
        else:
            commit = cached_commit(self.model_name, None) or "uncached"
        fields = {
            "model": self.model_name,
            "commit": commit,
            "precision": self.resolved_precision(),
            "comet": package_version("unbabel-comet"),
            "transformers": package_version("transformers"),
        }
        return "|".join(f"{key}:{value}" for key, value in fields.items())

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[Any]]:
        if rows.empty:
            return {column: [] for column in self.columns}
        return self.columns_of(self.predict(rows))

    def columns_of(self, prediction: Any) -> dict[str, Sequence[Any]]:
        return {self.name: [float(score) for score in prediction.scores]}

    def samples(self, rows: pd.DataFrame) -> list[dict[str, str]]:
        columns = {"src": "src_text", "mt": "mt_text"}
        if self.uses_reference:
            columns["ref"] = "ref_text"
        return [
            dict(zip(columns, values, strict=True))
            for values in zip(*(rows[column].tolist() for column in columns.values()), strict=True)
        ]

    def predict(self, rows: pd.DataFrame) -> Any:
        """unbabel-comet's Prediction for the rows, in their order.

        Every model call is the model's own (what `comet-score` runs): each batch prepared by
        `prepare_for_inference` and scored by `predict_step`, the order restored. The batches
        are this metric's (`batches`): by default sorted by length and sized by tokens, so that
        little of the GPU's work is padding; with `batch_tokens: null`, those of the model's
        own `predict` (sorted by the source's length in characters, `batch_size` each), whose
        scores are comet-score's exactly. Every batch is prepared before the first is scored,
        copied to the device from pinned memory without waiting, and the scores come back in
        one copy at the end: the host never waits on the GPU between batches (but for
        xCOMET's error spans, which unbabel-comet decodes batch by batch on the host).
        Left out is Lightning's Trainer, which that `predict` builds on every call: it starts
        data-loader processes and moves the whole model to the GPU and, at its teardown, back
        to the CPU, once per direction in a score job (seconds of copying per call for
        xCOMET-XL; benchmarks/gpu_results.md).
        """
        import torch
        from comet.models.utils import Prediction, flatten_metadata, restore_list_order

        model = self.load()
        samples = self.samples(rows)
        batches = self.batches(model, samples)
        device = torch.device(resolve_device(self.device))
        pinned = device.type == "cuda"
        prepared = [
            _on_host(model.prepare_for_inference([samples[i] for i in batch]), pinned)
            for batch in batches
        ]
        outputs = []
        # unbabel-comet casts a float16 model's head inputs to float16 itself (as comet-score
        # runs it), but not a bfloat16 one's: autocast gives every matmul bfloat16 inputs.
        with (
            torch.inference_mode(),
            torch.autocast(
                device.type,
                dtype=torch.bfloat16,
                enabled=self.resolved_precision() == "bfloat16",
            ),
        ):
            for batch in prepared:
                outputs.append(model.predict_step(_to_device(batch, device)))
            scores = torch.cat([output["scores"] for output in outputs]).tolist()
        order = [index for batch in batches for index in batch]
        prediction = Prediction(
            scores=restore_list_order(scores, order), system_score=sum(scores) / len(scores)
        )
        if "metadata" in outputs[0]:
            metadata = flatten_metadata([output["metadata"] for output in outputs])
            prediction["metadata"] = Prediction(
                **{key: restore_list_order(values, order) for key, values in metadata.items()}
            )
        return prediction

    def batches(self, model: Any, samples: Sequence[dict[str, str]]) -> list[list[int]]:
        """Indices into `samples`, batch by batch: under `batch_tokens` (each segment's tokens,
        every field counted as the encoder cuts it, times the batch's longest), longest first
        (`metricx.token_budget_batches`); else `batch_size` at a time in the order of the
        sources' lengths in characters, as unbabel-comet's `predict` makes them."""
        import numpy as np

        if self.batch_tokens is None:
            order = np.argsort([len(sample["src"]) for sample in samples])
            return [
                order[start : start + self.batch_size].tolist()
                for start in range(0, len(samples), self.batch_size)
            ]
        encoder = model.encoder
        lengths = np.zeros(len(samples), dtype=np.int64)
        for field in samples[0]:
            ids = encoder.tokenizer([sample[field] for sample in samples])["input_ids"]
            lengths += np.minimum([len(row) for row in ids], encoder.max_positions)
        return token_budget_batches(lengths.tolist(), self.batch_tokens)

    def load(self) -> Any:
        """The model, loaded on the first call: offline, in the resolved precision."""
        if self._model is not None:
            return self._model
        import comet
        import torch

        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        folder = checkpoint_folder(self.model_name)
        precision = self.resolved_precision()
        log.info("%s: loading %s (%s)", self.name, self.model_name, precision)
        model = comet.load_from_checkpoint(str(folder / CHECKPOINT), local_files_only=True)
        requires_reference = bool(model.requires_references())
        if requires_reference and not self.uses_reference:
            raise ValueError(
                f"{self.name}: {self.model_name} needs references; it is a model for "
                "`comet` or `xcomet`, not for this reference-free metric"
            )
        # On its device once, for every `predict` of the job.
        device = resolve_device(self.device)
        self._model = model.to(device=device, dtype=getattr(torch, precision)).eval()
        return self._model


class CometKiwi(CometMetric):
    """CometKiwi: COMET's quality estimation, from the source and the translation alone."""

    name = "cometkiwi"
    columns = ("cometkiwi",)
    default_model = "Unbabel/wmt22-cometkiwi-da"
    uses_reference = False


class XComet(CometMetric):
    """xCOMET: a sentence score and the error spans it found, per sentence."""

    name = "xcomet"
    spans_column = "xcomet_error_spans"
    columns: tuple[str, ...] = ("xcomet", spans_column)
    label_columns = (spans_column,)
    """The spans are a JSON list per sentence (`error_spans`), not a score."""
    default_model = "Unbabel/XCOMET-XL"

    def columns_of(self, prediction: Any) -> dict[str, Sequence[Any]]:
        spans = error_spans(prediction)
        return {
            **super().columns_of(prediction),
            self.spans_column: [
                json.dumps([vars(span) for span in sentence], ensure_ascii=False)
                for sentence in spans
            ],
        }


def _on_host(batch: Any, pinned: bool) -> Any:
    """A prepared batch's tensors, in page-locked memory when they go to a GPU: copies from it
    run beside the GPU's work, where copies from plain memory wait for it."""
    if not pinned:
        return batch
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.pin_memory()
    if isinstance(batch, dict):
        return {key: _on_host(value, pinned) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_on_host(value, pinned) for value in batch)
    return batch


def _to_device(batch: Any, device: Any) -> Any:
    """`_on_host`'s batch on `device`, copied without waiting (pinned memory)."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {key: _to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(value, device) for value in batch)
    return batch


def error_spans(prediction: Any) -> list[list[ErrorSpan]]:
    """Each sentence's error spans, from an xCOMET Prediction's metadata."""
    return [
        [
            ErrorSpan(
                text=str(span["text"]),
                start=int(span["start"]),
                end=int(span["end"]),
                severity=str(span["severity"]),
                confidence=float(span["confidence"]),
            )
            for span in sentence
        ]
        for sentence in prediction.metadata.error_spans
    ]
