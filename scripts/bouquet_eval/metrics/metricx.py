"""MetricX-24: an mT5 regression model's error score per segment, 0 (best) to 25 (worst).

Scores match google-research/metricx (`metricx24/predict.py`, which scores one segment at a
time) while batching many segments: inputs are sorted by length and packed under a token
budget, so little compute goes to padding, and the scores are returned in the rows' order.
The token ids are those of the official pipeline's tokenizer (see `metricx_tokenizer`).
torch, transformers and tokenizers are imported only when first needed, by `score`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import pandas as pd

from bouquet_eval.core.devices import resolve_device, resolve_dtype
from bouquet_eval.metrics import metricx_tokenizer

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

MAX_INPUT_TOKENS = 1536
SCORE_RANGE = (0.0, 25.0)
PAD_ID = 0
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class BatchCounts:
    """Work done by the model: segments, batches, and tokens without and with padding."""

    segments: int = 0
    batches: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0

    @property
    def real_ratio(self) -> float:
        """The share of the tokens run through the encoder that were not padding."""
        return self.real_tokens / self.padded_tokens if self.padded_tokens else 1.0

    def add(self, other: BatchCounts) -> None:
        self.segments += other.segments
        self.batches += other.batches
        self.real_tokens += other.real_tokens
        self.padded_tokens += other.padded_tokens


def metricx_input(source: str, candidate: str, reference: str | None) -> str:
    """The model's input text; `reference=None` gives the quality-estimation (QE) form."""
    if reference is None:
        return f"source: {source} candidate: {candidate}"
    return f"source: {source} candidate: {candidate} reference: {reference}"


def token_budget_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indices into `lengths` grouped so that batch size x longest length <= budget.

    Longest first, so that a batch that does not fit in memory fails at once rather than at the
    end of a long job. A segment longer than the budget on its own still gets a batch.
    """
    order = sorted(range(len(lengths)), key=lambda index: lengths[index], reverse=True)
    batches: list[list[int]] = []
    for index in order:
        # In descending order a batch's first segment is its longest.
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= budget:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


class MetricX:
    name = "metricx"
    columns = ("metricx",)

    def __init__(
        self,
        model: str = "google/metricx-24-hybrid-xl-v2p6",
        tokenizer: str = "google/mt5-xl",
        qe: bool = False,
        device: str = "auto",
        dtype: str = "auto",
        # Within 4% of the fastest budget measured on an H100 at about half its peak memory
        # (benchmarks/gpu_results.md).
        batch_tokens: int = 16384,
    ) -> None:
        if dtype not in ("auto", *DTYPES):
            raise ValueError(f"metricx dtype must be 'auto' or one of {DTYPES}, not '{dtype}'")
        if batch_tokens < 1:
            raise ValueError(f"metricx batch_tokens must be positive, not {batch_tokens}")
        self.model_name = str(model)
        self.tokenizer_name = str(tokenizer)
        self.qe = qe
        self.device = device
        self.dtype = dtype
        self.batch_tokens = batch_tokens
        self.counts = BatchCounts()
        """Cumulative over every `score` call."""
        self.pad_multiple = 1
        """Each batch is padded to a multiple of this many tokens (1: to its longest input);
        benchmarks/metricx_flops.py measures 16, the fused attention kernels' alignment."""
        self._model: Any = None
        self._tokenizer: Any = None
        self._score_id: int | None = None

    def resolved_device(self) -> str:
        return resolve_device(self.device)

    def resolved_dtype(self) -> str:
        return resolve_dtype(self.dtype, self.device)

    def signature(self) -> str:
        fields = {
            "model": self.model_name,
            "tokenizer": self.tokenizer_name,
            "qe": "yes" if self.qe else "no",
            "maxlen": MAX_INPUT_TOKENS,
            "tokenization": metricx_tokenizer.SCHEME,
            "dtype": self.resolved_dtype(),
            "tokenizers": version("tokenizers"),
            "transformers": version("transformers"),
        }
        return "|".join(f"{key}:{value}" for key, value in fields.items())

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[float]]:
        if rows.empty:
            return {"metricx": []}
        sequences = self.encode(rows)
        batches = token_budget_batches([len(sequence) for sequence in sequences], self.batch_tokens)
        scores, counts = self.score_encoded(sequences, batches)
        log.info(
            "metricx: %d segments in %d batches, real/padded tokens %d/%d = %.3f",
            counts.segments,
            counts.batches,
            counts.real_tokens,
            counts.padded_tokens,
            counts.real_ratio,
        )
        return {"metricx": scores}

    def encode(self, rows: pd.DataFrame) -> list[list[int]]:
        """Token ids per row, cut to the model's limit, without the final end-of-sequence token.

        The reference implementation drops the last token even when truncation has already cut
        the real end off, so a long input ends one token short of the limit, with no end token.
        """
        tokenizer = self._load_tokenizer()
        references: Sequence[str | None] = (
            [None] * len(rows) if self.qe else rows["ref_text"].tolist()
        )
        texts = [
            metricx_input(source, candidate, reference)
            for source, candidate, reference in zip(
                rows["src_text"], rows["mt_text"], references, strict=True
            )
        ]
        return [encoding.ids[:-1] for encoding in tokenizer.encode_batch(texts)]

    def score_encoded(
        self, sequences: Sequence[Sequence[int]], batches: Sequence[Sequence[int]]
    ) -> tuple[list[float], BatchCounts]:
        """Scores of `sequences` in their order, computed batch by batch as `batches` groups them.

        `batches` holds indices into `sequences`, each exactly once. Every batch is padded
        before the first is scored and copied to the device from pinned memory without
        waiting; the scores stay on the device until the last batch is done and come back in
        one copy: the host never waits on the GPU between batches.
        """
        import torch

        if sorted(index for batch in batches for index in batch) != list(range(len(sequences))):
            raise ValueError("metricx: every segment must be in exactly one batch")
        self._load()
        device = self._model.device
        padded = [
            self._pad([sequences[index] for index in batch], pinned=device.type == "cuda")
            for batch in batches
        ]
        counts = BatchCounts(
            segments=len(sequences),
            batches=len(batches),
            real_tokens=sum(len(sequence) for sequence in sequences),
            padded_tokens=sum(input_ids.numel() for input_ids, _ in padded),
        )
        with torch.inference_mode():
            logits = [
                self._forward(
                    input_ids.to(device, non_blocking=True),
                    attention_mask.to(device, non_blocking=True),
                )
                for input_ids, attention_mask in padded
            ]
            values = torch.cat(logits).float().clamp(*SCORE_RANGE).tolist()
        scores = [0.0] * len(sequences)
        for index, value in zip((i for batch in batches for i in batch), values, strict=True):
            scores[index] = value
        self.counts.add(counts)
        return scores, counts

    def _pad(
        self, sequences: Sequence[Sequence[int]], pinned: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch's ids and attention mask on the host, padded to its longest sequence (rounded
        up to `pad_multiple`); in page-locked memory when `pinned`, for copies that do not wait."""
        import numpy as np
        import torch

        longest = max(len(sequence) for sequence in sequences)
        width = -(-longest // self.pad_multiple) * self.pad_multiple
        lengths = np.array([len(sequence) for sequence in sequences])
        attention_mask = np.arange(width)[None, :] < lengths[:, None]
        input_ids = np.full((len(sequences), width), PAD_ID, dtype=np.int64)
        input_ids[attention_mask] = np.concatenate([np.asarray(s) for s in sequences])
        tensors = (torch.from_numpy(input_ids), torch.from_numpy(attention_mask.astype(np.int64)))
        return (tensors[0].pin_memory(), tensors[1].pin_memory()) if pinned else tensors

    def _forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The score logit of each input, on the device (unclamped)."""
        import torch

        # The regression head reads one decoder step, started from the pad id as T5 decoders are.
        decoder_input_ids = torch.full(
            (input_ids.shape[0], 1), PAD_ID, dtype=torch.long, device=input_ids.device
        )
        logits = self._model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            use_cache=False,
        ).logits
        return logits[:, 0, self._score_id]

    def _load_tokenizer(self) -> Any:
        if self._tokenizer is None:
            files = metricx_tokenizer.tokenizer_files(self.tokenizer_name)
            tokenizer = metricx_tokenizer.build_tokenizer(files, MAX_INPUT_TOKENS)
            self._score_id = metricx_tokenizer.score_token_id(tokenizer, self.tokenizer_name)
            self._tokenizer = tokenizer
        return self._tokenizer

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import MT5ForConditionalGeneration

        self._load_tokenizer()
        device, dtype = self.resolved_device(), self.resolved_dtype()
        log.info("metricx: loading %s (%s) on %s", self.model_name, dtype, device)
        model = MT5ForConditionalGeneration.from_pretrained(
            self.model_name, dtype=getattr(torch, dtype)
        )
        check_untied(model, self.model_name)
        for speed_up in SPEED_UPS.values():
            speed_up(model)
        # transformers types `to` through a decorator that drops the bound model.
        self._model = model.to(device).eval()  # type: ignore[arg-type]


def fuse_gelu(model: Any) -> None:
    """The gated FFN's tanh-approximated GELU as one kernel instead of transformers' eight.

    transformers' `gelu_new` spells the formula out in tensor operations, each a pass over the
    FFN's widest activations (tokens x d_ff); torch's `gelu(approximate="tanh")` computes the
    same formula in one pass.
    """
    import torch
    from transformers.activations import NewGELUActivation

    for module in model.modules():
        if isinstance(getattr(module, "act", None), NewGELUActivation):
            module.act = torch.nn.GELU(approximate="tanh")


def fuse_rms_norm(model: Any) -> None:
    """mT5's layer norms through torch's `rms_norm`, in float32 as mT5 computes them."""
    import types

    import torch
    from transformers.models.mt5.modeling_mt5 import MT5LayerNorm

    def forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
        normed = torch.nn.functional.rms_norm(
            hidden_states.float(), (hidden_states.shape[-1],), eps=self.variance_epsilon
        )
        return self.weight * normed.to(self.weight.dtype)

    for module in model.modules():
        if isinstance(module, MT5LayerNorm):
            # This instance's forward, not the class's: other models in the process keep theirs.
            module.forward = types.MethodType(forward, module)  # type: ignore[method-assign]


def contiguous_position_bias(model: Any) -> None:
    """mT5's relative position bias laid out row by row, so that attention runs fused.

    transformers computes the bias as (1, heads, queries, keys) by permuting a (queries, keys,
    heads) lookup, so its last dimension has a stride of the head count; the attention mask
    built from it keeps that layout, and a GPU's fused attention kernels refuse a mask whose
    last dimension is not contiguous (measured on an H200: benchmarks/gpu_results.md). PyTorch
    then runs attention its plain way, in float32 on CUDA cores. The bias is computed once
    per forward pass and shared by every layer, so one copy fixes the layout.
    """
    for module in model.modules():
        if getattr(module, "has_relative_attention_bias", False):
            compute_bias = module.compute_bias

            def contiguous(*arguments: Any, _compute: Any = compute_bias, **settings: Any) -> Any:
                return _compute(*arguments, **settings).contiguous()

            module.compute_bias = contiguous


SPEED_UPS = {
    "fused GELU": fuse_gelu,
    "fused RMS norm": fuse_rms_norm,
    "contiguous position bias": contiguous_position_bias,
}
"""Changes to the model's eager code that compute the same numbers with fewer passes over
memory, applied at load (benchmarks/metricx_flops.py measures each)."""


def check_untied(model: Any, name: str) -> None:
    """Refuse a model whose lm_head is the input embedding matrix.

    MetricX checkpoints carry a trained lm_head of their own, and the score is one of its
    logits. Tied weights mean that head was lost on the way (a checkpoint without it, or a
    transformers version that ties weights regardless), and the scores would be meaningless.
    """
    import torch

    head, shared = model.lm_head.weight, model.shared.weight
    if head.data_ptr() == shared.data_ptr() or torch.equal(head, shared):
        raise ValueError(
            f"metricx: {name} has its lm_head tied to the shared input embeddings; MetricX "
            "scores come from a trained lm_head of their own, so this checkpoint (or this "
            "transformers version's loading of it) cannot give MetricX scores"
        )
