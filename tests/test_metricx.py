"""MetricX on a tiny random mT5, checked against a plain one-segment-at-a-time computation."""

from __future__ import annotations

import logging
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import tokenizers
import torch
import transformers
from transformers import MT5ForConditionalGeneration

from bouquet_eval.metrics import load_metric
from bouquet_eval.metrics.metricx import MetricX, token_budget_batches
from bouquet_eval.metrics.metricx_tokenizer import build_tokenizer, tokenizer_files

from .tiny_mt5 import TinyCheckpoint, build_tiny_mt5, pseudo_sentence

LIMIT = 1536
TOLERANCE = 5e-5
"""On scores from 0 to 25: float32 sums come out a little different in other batch shapes."""


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> TinyCheckpoint:
    return build_tiny_mt5(tmp_path_factory.mktemp("tiny-mt5"), seed=0)


def make_metric(checkpoint: TinyCheckpoint, **settings: Any) -> MetricX:
    return MetricX(
        model=str(checkpoint.model), tokenizer=str(checkpoint.tokenizer), device="cpu", **settings
    )


def frame(triples: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "src_lang": "xxx_Xxxx",
            "tgt_lang": "yyy_Yyyy",
            "src_text": [source for source, _, _ in triples],
            "ref_text": [reference for _, _, reference in triples],
            "mt_text": [candidate for _, candidate, _ in triples],
        }
    )


def input_texts(rows: pd.DataFrame, qe: bool) -> list[str]:
    texts = []
    for source, candidate, reference in zip(
        rows["src_text"], rows["mt_text"], rows["ref_text"], strict=True
    ):
        text = f"source: {source} candidate: {candidate}"
        texts.append(text if qe else f"{text} reference: {reference}")
    return texts


def official_tokenizer(checkpoint: TinyCheckpoint) -> tokenizers.Tokenizer:
    """The tokenizer with the official pipeline's ids (test_metricx_tokenization.py proves it)."""
    return build_tokenizer(tokenizer_files(str(checkpoint.tokenizer)), LIMIT)


def score_id(tokenizer: tokenizers.Tokenizer) -> int:
    # mT5 numbers its sentinels down from the end of the vocabulary: <extra_id_10> is 11th last.
    return tokenizer.get_vocab_size() - 11


def raw_logits(checkpoint: TinyCheckpoint, rows: pd.DataFrame, qe: bool) -> list[float]:
    """The score logit per row, unclamped, one row at a time, as metricx24/predict.py does it."""
    tokenizer = official_tokenizer(checkpoint)
    model = MT5ForConditionalGeneration.from_pretrained(checkpoint.model).eval()
    logits = []
    for text in input_texts(rows, qe):
        # Cut to the limit with the final </s> kept, which is then dropped.
        ids = torch.tensor([tokenizer.encode(text).ids[:-1]])
        with torch.no_grad():
            output = model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                decoder_input_ids=torch.zeros((1, 1), dtype=torch.long),
            )
        logits.append(output.logits[0, 0, score_id(tokenizer)].item())
    return logits


def clamped(logits: list[float]) -> list[float]:
    return [min(max(logit, 0.0), 25.0) for logit in logits]


def long_text(rng: random.Random, words: int) -> str:
    return pseudo_sentence(rng, words, ("latin", "cyrillic", "han"))


MIXED = [
    ("Hello world, how are you?", "Привет, мир!", "Привет, мир, как дела?"),
    ("مرحبا بالعالم", "", "Hello, world."),  # an empty candidate
    ("你好世界。\n第二行", "नमस्ते दुनिया", "नमस्ते, दुनिया!\n"),
    ("a line\nanother line\n\n", "🙂🚀 party 🎉", "🎉🎉 fête"),
    ("Ünïcödé façade — naïve", "ünicode facade - naive", "Unicode façade, naïve"),
    ("", "", ""),
]


def mixed_rows(lengths: list[int], seed: int) -> pd.DataFrame:
    """Fixed multilingual rows plus generated ones of the given word counts."""
    rng = random.Random(seed)
    generated = [
        (pseudo_sentence(rng, words), pseudo_sentence(rng, words), pseudo_sentence(rng, words))
        for words in lengths
    ]
    return frame(MIXED + generated)


@pytest.mark.parametrize("qe", [False, True], ids=["reference", "qe"])
def test_batched_scores_equal_one_at_a_time(checkpoint: TinyCheckpoint, qe: bool) -> None:
    rows = mixed_rows([3, 25, 1, 50, 12, 7, 20, 40, 2, 15, 9, 18], seed=1)
    rows.loc[len(rows)] = rows.iloc[0]  # and one that is cut to the limit
    rows.loc[len(rows) - 1, "src_text"] = long_text(random.Random(2), 600)
    metric = make_metric(checkpoint, qe=qe, batch_tokens=1024)

    scores = metric.score(rows)["metricx"]

    logits = raw_logits(checkpoint, rows, qe)
    np.testing.assert_allclose(scores, clamped(logits), rtol=0, atol=TOLERANCE)
    # Batches of several segments were formed, and the clamp was reached on some rows.
    assert metric.counts.batches < len(rows)
    assert any(logit < 0 or logit > 25 for logit in logits)
    assert all(0 <= score <= 25 for score in scores)
    assert len(set(scores)) > len(rows) // 2


def test_input_is_cut_to_the_limit(checkpoint: TinyCheckpoint) -> None:
    tokenizer = official_tokenizer(checkpoint)
    tokenizer.no_truncation()
    rng = random.Random(3)
    source = long_text(rng, 500)
    # Different words, candidates and references after the cut change nothing.
    rows = frame(
        [
            (source, "a candidate", "a reference"),
            (source + " " + long_text(rng, 50), "another one", "and another"),
        ]
    )
    full = f"source: {source} candidate: a candidate reference: a reference"
    full_ids = tokenizer.encode(full).ids
    assert len(full_ids) > LIMIT + 100

    scores = make_metric(checkpoint).score(rows)["metricx"]

    assert scores[0] == pytest.approx(scores[1], abs=TOLERANCE)
    model = MT5ForConditionalGeneration.from_pretrained(checkpoint.model).eval()

    def logit(ids: list[int]) -> float:
        with torch.no_grad():
            output = model(
                input_ids=torch.tensor([ids]),
                decoder_input_ids=torch.zeros((1, 1), dtype=torch.long),
            )
        return output.logits[0, 0, score_id(tokenizer)].item()

    # The kept part is the first LIMIT - 1 tokens of the whole input, and the cut matters.
    assert scores[0] == pytest.approx(min(max(logit(full_ids[: LIMIT - 1]), 0), 25), abs=TOLERANCE)
    assert abs(logit(full_ids[:-1]) - logit(full_ids[: LIMIT - 1])) > 1e-3


def test_order_is_restored_across_very_different_lengths(checkpoint: TinyCheckpoint) -> None:
    rows = mixed_rows([1, 60, 2, 30, 1, 120, 4, 15, 3], seed=4)
    metric = make_metric(checkpoint, batch_tokens=2048)

    scores = metric.score(rows)["metricx"]
    reversed_scores = metric.score(rows.iloc[::-1].reset_index(drop=True))["metricx"]

    np.testing.assert_allclose(scores, clamped(raw_logits(checkpoint, rows, False)), atol=TOLERANCE)
    np.testing.assert_allclose(reversed_scores, scores[::-1], atol=TOLERANCE)


def test_qe_ignores_the_reference(checkpoint: TinyCheckpoint) -> None:
    rows = mixed_rows([5, 10, 20], seed=5)
    other_references = rows.assign(ref_text=[f"something else {i}" for i in range(len(rows))])
    qe = make_metric(checkpoint, qe=True)
    with_reference = make_metric(checkpoint)

    qe_scores = qe.score(rows)["metricx"]

    assert qe.score(other_references)["metricx"] == pytest.approx(qe_scores, abs=TOLERANCE)
    assert qe.score(rows.drop(columns="ref_text"))["metricx"] == pytest.approx(
        qe_scores, abs=TOLERANCE
    )
    changed = np.abs(
        np.array(with_reference.score(rows)["metricx"])
        - np.array(with_reference.score(other_references)["metricx"])
    )
    assert changed.max() > 1e-3


def test_tied_lm_head_is_refused(tmp_path: Path) -> None:
    tied = build_tiny_mt5(tmp_path, seed=0, tied=True)
    metric = MetricX(model=str(tied.model), tokenizer=str(tied.tokenizer), device="cpu")

    with pytest.raises(ValueError, match=r"tied") as raised:
        metric.score(mixed_rows([], seed=6))
    assert str(tied.model) in str(raised.value)


def test_model_loads_once_on_first_score(checkpoint: TinyCheckpoint, tmp_path: Path) -> None:
    copy = TinyCheckpoint(model=tmp_path / "model", tokenizer=tmp_path / "tokenizer")
    shutil.copytree(checkpoint.model, copy.model)
    shutil.copytree(checkpoint.tokenizer, copy.tokenizer)
    metric = make_metric(copy)
    rows = mixed_rows([4, 8], seed=7)

    first = metric.score(rows)["metricx"]
    # Later calls can only succeed with what the first one loaded.
    shutil.rmtree(tmp_path)
    second = metric.score(rows)["metricx"]
    third = metric.score(rows.iloc[:2])["metricx"]

    assert second == pytest.approx(first, abs=TOLERANCE)
    assert third == pytest.approx(first[:2], abs=TOLERANCE)


def test_nothing_loads_for_no_rows() -> None:
    metric = MetricX(model="/no/such/model", tokenizer="/no/such/tokenizer", device="cpu")

    assert list(metric.score(frame([]))["metricx"]) == []


def test_construction_imports_neither_torch_nor_transformers() -> None:
    program = """
import sys
from bouquet_eval.metrics import load_metric
metric = load_metric("metricx", {"model": "/no/such/model", "device": "cpu", "qe": True})
print(metric.signature())
assert metric.columns == ("metricx",)
heavy = sorted(name for name in ("torch", "transformers") if name in sys.modules)
assert not heavy, heavy
"""
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stderr
    assert "qe:yes" in result.stdout


def test_padding_counts_add_up(
    checkpoint: TinyCheckpoint, caplog: pytest.LogCaptureFixture
) -> None:
    rows = mixed_rows([2, 50, 5, 120, 9], seed=8)
    tokenizer = official_tokenizer(checkpoint)
    lengths = [len(tokenizer.encode(text).ids) - 1 for text in input_texts(rows, qe=False)]
    budget = 600
    metric = make_metric(checkpoint, batch_tokens=budget)

    with caplog.at_level(logging.INFO, logger="bouquet_eval.metrics.metricx"):
        metric.score(rows)
        metric.score(rows)

    batches = token_budget_batches(lengths, budget)
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    counts = metric.counts
    assert (counts.segments, counts.batches) == (2 * len(rows), 2 * len(batches))
    assert (counts.real_tokens, counts.padded_tokens) == (2 * sum(lengths), 2 * padded)
    assert 0 < counts.real_ratio < 1
    summaries = [record.getMessage() for record in caplog.records if "batches" in record.message]
    expected = f"{len(rows)} segments in {len(batches)} batches, real/padded tokens "
    assert (
        summaries == [f"metricx: {expected}{sum(lengths)}/{padded} = {counts.real_ratio:.3f}"] * 2
    )

    one_by_one = make_metric(checkpoint, batch_tokens=1)
    one_by_one.score(rows)
    assert one_by_one.counts.batches == len(rows)
    assert one_by_one.counts.real_tokens == one_by_one.counts.padded_tokens == sum(lengths)


def test_token_budget_batches() -> None:
    rng = random.Random(9)
    lengths = [rng.choice([rng.randint(1, 60), rng.randint(200, 1535)]) for _ in range(500)]
    budget = 1000

    batches = token_budget_batches(lengths, budget)

    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    for batch in batches:
        batch_lengths = [lengths[index] for index in batch]
        assert batch_lengths == sorted(batch_lengths, reverse=True)
        assert len(batch) == 1 or len(batch) * batch_lengths[0] <= budget
    # Segments over the budget go alone; the short ones share batches.
    assert all(len(batch) == 1 for batch in batches if lengths[batch[0]] > budget // 2)
    assert max(len(batch) for batch in batches) >= budget // 60
    assert token_budget_batches([], budget) == []


def test_scores_in_bfloat16_stay_close(checkpoint: TinyCheckpoint) -> None:
    rows = mixed_rows([10, 30], seed=10)

    full = make_metric(checkpoint).score(rows)["metricx"]
    half = make_metric(checkpoint, dtype="bfloat16").score(rows)["metricx"]

    assert half != full
    np.testing.assert_allclose(half, full, atol=1.0)


def test_signature() -> None:
    metric = MetricX(device="cpu")

    assert metric.signature() == (
        "model:google/metricx-24-hybrid-xl-v2p6|tokenizer:google/mt5-xl|qe:no|maxlen:1536"
        f"|tokenization:t5fast-hf4.30.2|dtype:float32|tokenizers:{tokenizers.__version__}"
        f"|transformers:{transformers.__version__}"
    )
    # How the work is split and where it runs do not change the scores.
    assert MetricX(device="cpu", batch_tokens=5).signature() == metric.signature()
    assert "qe:yes" in MetricX(qe=True, device="cpu").signature()
    assert "|dtype:bfloat16|" in MetricX(device="cpu", dtype="bfloat16").signature()
    assert "model:/models/x|" in load_metric("metricx", {"model": "/models/x"}).signature()
    with pytest.raises(ValueError, match="dtype"):
        MetricX(dtype="float64")


def test_attention_gets_what_fused_kernels_take(
    checkpoint: TinyCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every attention call goes to torch's scaled_dot_product_attention in the model's own
    precision, its mask (the position bias and the padding) laid out row by row: what a GPU's
    fused kernels require of it (a mask whose last dimension steps over the heads sends
    attention to float32 on CUDA cores: benchmarks/gpu_results.md). A last dimension of one
    key (the decoder's one step attending to itself) has no layout."""
    seen: list[tuple[torch.dtype, tuple[int, ...], tuple[int, ...]]] = []
    attention = torch.nn.functional.scaled_dot_product_attention

    def recorded(query: torch.Tensor, *arguments: Any, **settings: Any) -> torch.Tensor:
        mask = settings.get("attn_mask", arguments[2] if len(arguments) > 2 else None)
        assert mask is not None
        seen.append((query.dtype, tuple(mask.shape), tuple(mask.stride())))
        return attention(query, *arguments, **settings)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recorded)
    make_metric(checkpoint, dtype="bfloat16").score(mixed_rows([5, 40], seed=3))
    assert {dtype for dtype, _, _ in seen} == {torch.bfloat16}
    laid_out = [(shape, strides) for _, shape, strides in seen if shape[-1] > 1]
    assert laid_out and all(strides[-1] == 1 for _, strides in laid_out), laid_out[:3]
