"""BLASER 2.0 through sonar-space: reference-based (`blaser`) and quality estimation
(`blaser_qe`) sentence scores, about 1 (worst) to 5 (best).

BLASER 2.0 is a small network over SONAR sentence embeddings: of the source, the translation
and (reference-based) the reference. Each is embedded with sonar-space's own
`TextToEmbeddingModelPipeline` (its tokenizer marks a sentence with its language's SONAR code,
`sonar_languages.sonar_code`; its `predict` sorts a call's sentences by length and cuts them
into `batch_size` batches) and scored by sonar-space's own `BlaserModel`, so the scores are
those of sonar-space's README pipeline. What is added is economy, for a job that scores
hundreds of directions: the encoder and the BLASER model load once per job, and each distinct
source and reference sentence is embedded once per job (`Blaser.embed`): a language's
sentences are the sources of its directions out and the references of its directions in, for
every model. A direction's sentences of one language go to the encoder in one call.

`encoder` names the SONAR text encoder: a Hub repository holding `sonar_text_encoder.pt` and
`sentencepiece.source.256000.model` (facebook/SONAR: the files sonar-space's
`text_sonar_basic_encoder` card downloads), or a local folder holding them; `checkpoint` names
the BLASER model, a Hub repository or a local folder holding `model.pt`. Both are read from
the local cache only (`prefetch` fills it). A folder may also hold `model_config.yaml`, the
fairseq2 `model_config` of a model not of the released shape (the tests' tiny ones); the
architecture is otherwise sonar-space's own card's.

sonar-space's fairseq2 pins torch 2.9.1, which the workflow's environment cannot hold: it runs
in an environment of its own (envs/blaser-requirements.txt, docs/metrics-blaser.md). torch,
fairseq2 and sonar are imported only when a model is loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd

from bouquet_eval.core.devices import resolve_device, resolve_dtype
from bouquet_eval.core.environment import cached_commit
from bouquet_eval.data.hub import is_local, model_folder
from bouquet_eval.metrics.comet import package_version
from bouquet_eval.metrics.sonar_languages import refusal, sonar_code

log = logging.getLogger(__name__)

DTYPES = ("float32", "bfloat16", "float16")
DEFAULT_ENCODER = "facebook/SONAR"
ENCODER_CARD = "text_sonar_basic_encoder"
"""sonar-space's card of the encoder: its architecture and its tokenizer's settings."""
ENCODER_FILES = ("sonar_text_encoder.pt", "sentencepiece.source.256000.model")
CHECKPOINT_FILE = "model.pt"
MODEL_CONFIG = "model_config.yaml"
DEFAULT_BATCH_SIZE = 64
SCORE_BATCH = 4096
"""Sentences per call of the BLASER model (a few matrix products per sentence)."""


class Blaser:
    """BLASER 2.0, reference-based: a score from the source, translation and reference."""

    name = "blaser"
    columns: tuple[str, ...] = ("blaser",)
    card = "blaser_2_0_ref"
    """sonar-space's card of the model: its architecture."""
    default_checkpoint = "facebook/blaser-2.0-ref"
    uses_reference = True

    def __init__(
        self,
        encoder: str = DEFAULT_ENCODER,
        checkpoint: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "auto",
        dtype: str = "auto",
        languages: Mapping[str, str] = MappingProxyType({}),
    ) -> None:
        if dtype not in ("auto", *DTYPES):
            raise ValueError(f"{self.name} dtype must be 'auto' or one of {DTYPES}, not '{dtype}'")
        if batch_size < 1:
            raise ValueError(f"{self.name} batch_size must be positive, not {batch_size}")
        self.encoder = str(encoder)
        self.checkpoint = str(checkpoint or self.default_checkpoint)
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.languages = dict(languages)
        self._model: Any = None

    def resolved_dtype(self) -> str:
        return resolve_dtype(self.dtype, self.device)

    def signature(self) -> str:
        fields = {
            "encoder": self.encoder,
            "encoder_commit": self._commit(self.encoder),
            "checkpoint": self.checkpoint,
            "checkpoint_commit": self._commit(self.checkpoint),
            "dtype": self.resolved_dtype(),
            "sonar": package_version("sonar-space"),
            "fairseq2": package_version("fairseq2"),
        }
        return "|".join(f"{key}:{value}" for key, value in fields.items())

    @staticmethod
    def _commit(spec: str) -> str:
        return "local" if is_local(spec) else cached_commit(spec, None) or "uncached"

    def sonar_code(self, code: str) -> str:
        reason = refusal(code, self.languages)
        if reason is not None:
            raise ValueError(f"{self.name}: {reason}")
        return str(sonar_code(code, self.languages))

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[Any]]:
        if rows.empty:
            return {self.name: []}
        import torch

        sources = [self.sonar_code(code) for code in rows["src_lang"]]
        targets = [self.sonar_code(code) for code in rows["tgt_lang"]]
        texts = {"src": list(zip(sources, rows["src_text"], strict=True))}
        texts["mt"] = list(zip(targets, rows["mt_text"], strict=True))
        if self.uses_reference:
            texts["ref"] = list(zip(targets, rows["ref_text"], strict=True))
        embeddings = self.embeddings().embed(texts)
        model = self.load()
        device = next(model.parameters()).device
        scores = []
        with torch.inference_mode():
            for start in range(0, len(rows), SCORE_BATCH):
                part = {
                    role: stacked[start : start + SCORE_BATCH].to(device, torch.float32)
                    for role, stacked in embeddings.items()
                }
                scores.append(model(**part).squeeze(-1).float().cpu())
        return {self.name: torch.cat(scores).tolist()}

    def embeddings(self) -> SentenceEmbeddings:
        """This job's embeddings of its encoder, batch size, device and dtype: shared by both
        forms of BLASER when they are configured alike."""
        key = (self.encoder, self.batch_size, resolve_device(self.device), self.resolved_dtype())
        if key not in _EMBEDDINGS:
            _EMBEDDINGS[key] = SentenceEmbeddings(*key)
        return _EMBEDDINGS[key]

    def load(self) -> Any:
        """The BLASER model, loaded on the first call: offline, on the resolved device, in
        float32 (a few matrix products per sentence)."""
        if self._model is not None:
            return self._model
        import torch
        from fairseq2.assets import AssetCard, AssetCardError, get_asset_store
        from fairseq2.models import load_model
        from sonar.models.blaser import BlaserModel

        log.info("%s: loading %s", self.name, self.checkpoint)
        folder = model_folder(
            self.checkpoint, (CHECKPOINT_FILE,), "BLASER checkpoint", (MODEL_CONFIG,)
        )
        card = AssetCard(
            f"{self.card}:{self.checkpoint}",
            {"checkpoint": (folder / CHECKPOINT_FILE).resolve().as_uri(), **model_config(folder)},
            get_asset_store().retrieve_card(self.card),
        )
        device = torch.device(resolve_device(self.device))
        try:
            model = load_model(card, device=device, dtype=torch.float32)
        except AssetCardError as error:
            raise ValueError(
                f"{self.name}: {self.checkpoint} does not load as a model of {self.card}'s "
                f"shape ({'reference-based' if self.uses_reference else 'quality estimation'}"
                f"): {error}"
            ) from error
        if not isinstance(model, BlaserModel):
            raise TypeError(f"{self.name}: {self.checkpoint} is not a BLASER model")
        self._model = model.eval()
        return self._model


class SentenceEmbeddings:
    """SONAR embeddings of one job's sentences: the encoder loaded once, on its first use, and
    each distinct source and reference sentence embedded once (`embed`)."""

    def __init__(self, encoder: str, batch_size: int, device: str, dtype: str) -> None:
        self.encoder = encoder
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self._pipeline: Any = None
        self.kept: dict[tuple[str, str], Any] = {}
        """(SONAR code, sentence) -> embedding, of every source and reference embedded."""
        self.recent: dict[tuple[str, str], Any] = {}
        """The translations of the last call (the other form scores the same direction)."""
        self.embedded = 0
        """Sentences sent to the encoder (each distinct one once)."""

    def embed(self, texts: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, Any]:
        """Each role's (SONAR code, sentence) pairs -> their embeddings, stacked in order.

        Sentences already embedded in this job are not embedded again; those still missing go
        to the encoder once each, one `predict` call per language (translations and
        references of a language together), which sorts them by length into batches. Sources
        and references are kept for the rest of the job (4 KB a sentence in float32: 3.5 MB
        per language of 854 sentences), translations until the next call.
        """
        import torch

        found: dict[tuple[str, str], Any] = {}
        missing: dict[str, list[str]] = {}
        for pairs in texts.values():
            for pair in pairs:
                if pair in found:
                    continue
                known = self.kept.get(pair)
                if known is None:
                    known = self.recent.get(pair)
                found[pair] = known
                if known is None:
                    missing.setdefault(pair[0], []).append(pair[1])
        for code, sentences in missing.items():
            embedded = self.pipeline().predict(
                sentences,
                source_lang=code,
                batch_size=self.batch_size,
                target_device=torch.device("cpu"),
            )
            found.update(zip(((code, text) for text in sentences), embedded, strict=True))
            self.embedded += len(sentences)
        for role in ("src", "ref"):
            self.kept.update((pair, found[pair]) for pair in texts.get(role, ()))
        self.recent = {pair: found[pair] for pair in texts.get("mt", ())}
        return {role: torch.stack([found[pair] for pair in pairs]) for role, pairs in texts.items()}

    def pipeline(self) -> Any:
        """sonar-space's `TextToEmbeddingModelPipeline` of the encoder, loaded on the first call:
        offline, on the device, in the dtype."""
        if self._pipeline is not None:
            return self._pipeline
        import torch
        from fairseq2.assets import AssetCard, get_asset_store
        from fairseq2.data.tokenizers import load_tokenizer
        from fairseq2.models import load_model
        from sonar.inference_pipelines.text import TextToEmbeddingModelPipeline

        log.info("SONAR text encoder: loading %s (%s)", self.encoder, self.dtype)
        folder = model_folder(
            self.encoder, ENCODER_FILES, "SONAR text encoder", extra=(MODEL_CONFIG,)
        )
        card = AssetCard(
            f"{ENCODER_CARD}:{self.encoder}",
            {
                "checkpoint": (folder / ENCODER_FILES[0]).resolve().as_uri(),
                "tokenizer": (folder / ENCODER_FILES[1]).resolve().as_uri(),
                **model_config(folder),
            },
            get_asset_store().retrieve_card(ENCODER_CARD),
        )
        on = {"device": torch.device(self.device), "dtype": getattr(torch, self.dtype)}
        self._pipeline = TextToEmbeddingModelPipeline(
            load_model(card, **on), load_tokenizer(card), **on
        )
        return self._pipeline


_EMBEDDINGS: dict[tuple[str, int, str, str], SentenceEmbeddings] = {}
"""This process's (a job's) embeddings, by encoder, batch size, device and dtype."""


def model_config(folder: Path) -> dict[str, Any]:
    """The `model_config` card field a folder's model_config.yaml gives, if it has one."""
    import yaml

    path = folder / MODEL_CONFIG
    if not path.is_file():
        return {}
    return {"model_config": yaml.safe_load(path.read_text(encoding="utf-8"))}


class BlaserQE(Blaser):
    """BLASER 2.0, quality estimation: a score from the source and the translation alone."""

    name = "blaser_qe"
    columns = ("blaser_qe",)
    card = "blaser_2_0_qe"
    default_checkpoint = "facebook/blaser-2.0-qe"
    uses_reference = False
