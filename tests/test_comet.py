"""The COMET family (bouquet_eval.metrics.comet) against unbabel-comet's own `comet-score`.

Tiny random checkpoints of the three released shapes (tests/comet_checkpoints.py) score the
bundled sample's 480 sentence pairs, each with a translation of its own, through our scorer
and through the `comet-score` command. The tests marked `comet` need unbabel-comet, which
lives in an environment of its own (.venv-comet, see the Makefile); the others run anywhere.

Tolerances, measured on these checkpoints (CPU, torch 2.13, unbabel-comet 2.2.7; the numbers
are benchmarks/comet_precision.py's, docs/metrics-comet.md has them all):
- at comet-score's own precision (it always runs `model.half()`: float16) and in its batches
  (`batch_tokens: null`) the scores and xCOMET's error spans are identical: the same code on
  the same batches; in our default batches, sized by tokens, they differ in the last digits
  (`BATCHING_TOLERANCE`);
- at our CPU default, float32, scores differ from comet-score's by at most 9.5e-4 (COMET-22
  7.1e-4, CometKiwi 5.7e-4, xCOMET 9.5e-4 where both precisions mark the same error spans;
  14 of 480 sentences' xCOMET spans differ, and with them the score, by up to 0.08);
- bfloat16 against float32: at most 1.2e-2 (xCOMET; 86 of 480 sentences' spans differ:
  these random models' span probabilities lie close together, near the decision boundaries).
"""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from bouquet_eval.data.hub import HubFiles
from bouquet_eval.metrics import load_metric
from bouquet_eval.metrics.comet import CHECKPOINT, HPARAMS, CometKiwi, CometMetric, XComet

from .comet_reference import Scored, comet_score, sample_pairs
from .hf_cache import COMMIT, cache_entry

SHAPES = {"comet": CometMetric, "cometkiwi": CometKiwi, "xcomet": XComet}
FLOAT16_TOLERANCE = 2e-3
"""Our float32 scores against comet-score's float16 ones, where xCOMET's spans agree."""
BFLOAT16_TOLERANCE = 2.5e-2
"""Our bfloat16 scores against our float32 ones, where xCOMET's spans agree."""
SPAN_CHANGES = {"float16": 0.05, "bfloat16": 0.25}
"""The share of sentences whose xCOMET error spans may differ from float32's."""
BATCHING_TOLERANCE = 1e-5
"""Batches sized by tokens against comet-score's, float32: padding changes sums' order."""


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory, one_thread: None) -> dict[str, Path]:
    from .comet_checkpoints import build_all

    return build_all(tmp_path_factory.mktemp("comet-checkpoints"))


@pytest.fixture(scope="session")
def sample_rows() -> pd.DataFrame:
    return sample_pairs()


@pytest.fixture(scope="session")
def reference(
    checkpoints: dict[str, Path],
    sample_rows: pd.DataFrame,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Scored]:
    """comet-score's scores of the sample, by shape."""
    folder = tmp_path_factory.mktemp("comet-score")
    return {
        shape: Scored.of_records(
            shape,
            comet_score(checkpoints[shape], sample_rows, metric.uses_reference, folder / shape),
        )
        for shape, metric in SHAPES.items()
    }


@pytest.fixture(scope="session")
def ours(checkpoints: dict[str, Path], sample_rows: pd.DataFrame) -> Callable[..., Scored]:
    """Our scores of the sample, by shape and precision (each computed once)."""

    @functools.cache
    def scored(shape: str, precision: str, batch_tokens: int | None = None) -> Scored:
        """In comet-score's batches unless `batch_tokens` is given."""
        metric = load_metric(
            f"bouquet_eval.metrics.comet:{SHAPES[shape].__name__}",
            {
                "model": str(checkpoints[shape]),
                "precision": precision,
                "device": "cpu",
                "batch_tokens": batch_tokens,
            },
        )
        assert f"precision:{precision}" in metric.signature()
        return Scored.of(shape, metric.score(sample_rows))

    return scored


@pytest.mark.comet
@pytest.mark.parametrize("shape", SHAPES)
def test_scores_equal_comet_score_at_its_precision(
    shape: str, reference: dict[str, Scored], ours: Callable[..., Scored]
) -> None:
    assert ours(shape, "float16") == reference[shape]
    # Not a constant: the random checkpoint tells sentences apart.
    assert len(set(reference[shape].scores)) > len(reference[shape].scores) // 2


@pytest.mark.comet
@pytest.mark.parametrize("shape", SHAPES)
def test_batches_sized_by_tokens_keep_the_scores(
    shape: str, ours: Callable[..., Scored], checkpoints: dict[str, Path]
) -> None:
    """The default batches (sorted by length, sized by tokens) against comet-score's, in
    float32: the same scores but for the last digits, and the same error spans."""
    budget = CometMetric.__init__.__defaults__[-1]  # type: ignore[index]
    largest, _, other_spans = ours(shape, "float32", budget).compare(ours(shape, "float32"))
    assert largest <= BATCHING_TOLERANCE
    assert other_spans == 0
    # A small budget, so that the sample makes batches of many sizes.
    largest, _, _ = ours(shape, "float32", 600).compare(ours(shape, "float32"))
    assert largest <= BATCHING_TOLERANCE


@pytest.mark.comet
def test_xcomet_marks_error_spans_within_the_translations(
    reference: dict[str, Scored], sample_rows: pd.DataFrame
) -> None:
    spans = reference["xcomet"].spans
    assert spans is not None and sum(map(len, spans)) > len(spans) // 2
    for sentence, (translation, marked) in enumerate(
        zip(sample_rows["mt_text"], spans, strict=True)
    ):
        for span in marked:
            assert 0 <= span["start"] <= span["end"] <= len(translation), sentence
            assert span["severity"] in ("minor", "major", "critical")


@pytest.mark.comet
@pytest.mark.parametrize("shape", SHAPES)
def test_float32_scores_are_within_the_stated_tolerance_of_comet_score(
    shape: str, reference: dict[str, Scored], ours: Callable[..., Scored]
) -> None:
    largest, _, other_spans = ours(shape, "float32").compare(reference[shape])
    assert 0 < largest <= FLOAT16_TOLERANCE  # above 0: float32 indeed, not float16
    assert other_spans <= SPAN_CHANGES["float16"] * len(reference[shape].scores)


@pytest.mark.comet
@pytest.mark.parametrize("shape", SHAPES)
def test_bfloat16_runs_on_the_cpu_close_to_float32(shape: str, ours: Callable[..., Scored]) -> None:
    largest, _, other_spans = ours(shape, "bfloat16").compare(ours(shape, "float32"))
    assert 0 < largest <= BFLOAT16_TOLERANCE
    assert other_spans <= SPAN_CHANGES["bfloat16"] * len(ours(shape, "float32").scores)


@pytest.mark.comet
def test_a_hub_id_loads_from_the_cache_alone(
    checkpoints: dict[str, Path],
    sample_rows: pd.DataFrame,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = checkpoints["comet"]
    hub = tmp_path / "hub"
    cache_entry(
        hub,
        "Unbabel/tiny-comet",
        {name: (folder / name).read_bytes() for name in (CHECKPOINT, HPARAMS)},
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))
    metric = CometMetric(model="Unbabel/tiny-comet", device="cpu")
    assert f"commit:{COMMIT}" in metric.signature()
    rows = sample_rows.head(20)
    assert metric.score(rows) == CometMetric(model=str(folder), device="cpu").score(rows)


@pytest.mark.comet
def test_a_scored_file_holds_scores_and_error_spans_from_one_model_load(
    checkpoints: dict[str, Path], sample_rows: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    import comet

    from bouquet_eval.scoring.score import scored_table

    loads = []
    load = comet.load_from_checkpoint

    def counted(*arguments: Any, **settings: Any) -> Any:
        loads.append(arguments)
        return load(*arguments, **settings)

    monkeypatch.setattr(comet, "load_from_checkpoint", counted)
    metric = XComet(model=str(checkpoints["xcomet"]), device="cpu")
    # Two directions' rows, as a score job scores them one after the other.
    tables = [scored_table(rows, [metric]) for rows in (sample_rows[:24], sample_rows[24:48])]
    assert len(loads) == 1
    for table in tables:
        assert table.schema.field("xcomet").type == "double"
        for value in table.column(XComet.spans_column).to_pylist():
            assert isinstance(json.loads(value), list)


@pytest.mark.comet
def test_cometkiwi_refuses_a_model_that_needs_references(
    checkpoints: dict[str, Path], sample_rows: pd.DataFrame
) -> None:
    with pytest.raises(ValueError, match="needs references"):
        CometKiwi(model=str(checkpoints["comet"])).score(sample_rows.head(2))


def test_settings_and_signature_without_loading_anything() -> None:
    for name, metric_class in SHAPES.items():
        metric = load_metric(f"bouquet_eval.metrics.comet:{metric_class.__name__}")
        assert metric.name == name and metric.columns[0] == name
        assert metric.model_name.startswith("Unbabel/")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="precision must be"):
        CometMetric(precision="fp8")
    with pytest.raises(ValueError, match="batch_size must be positive"):
        XComet(batch_size=0)
    with pytest.raises(ValueError, match="batch_tokens must be positive"):
        XComet(batch_tokens=0)
    signature = CometMetric(model="Unbabel/never-fetched", device="cpu").signature()
    fields = dict(field.split(":", 1) for field in signature.split("|"))
    assert fields["model"] == "Unbabel/never-fetched"
    assert fields["commit"] == "uncached"
    assert fields["precision"] == "float32"
    assert {"comet", "transformers"} <= set(fields)
    assert CometMetric().score(pd.DataFrame(columns=["src_text", "mt_text", "ref_text"])) == {
        "comet": []
    }


class WordsTokenizer:
    """A tokenizer that makes a token of each word, plus two special ones."""

    def __call__(self, texts: list[str]) -> dict[str, list[list[int]]]:
        return {"input_ids": [[0, *range(len(text.split())), 2] for text in texts]}


def test_batches_are_sorted_by_length_and_sized_by_tokens() -> None:
    """Every segment once, longest first; a batch's segments times its longest segment's tokens
    (every field counted, each cut as the encoder cuts it) within the budget, unless one
    segment alone exceeds it."""
    import random

    words = random.Random(0)
    samples = [
        {field: " ".join(["w"] * words.randint(1, 60)) for field in ("src", "mt", "ref")}
        for _ in range(200)
    ]
    samples[7]["src"] = " ".join(["w"] * 900)  # cut at the encoder's 512 positions
    model = type("Model", (), {"encoder": type("Encoder", (), {})()})()
    model.encoder.tokenizer = WordsTokenizer()
    model.encoder.max_positions = 512
    metric = CometMetric(batch_tokens=1000)
    batches = metric.batches(model, samples)
    assert sorted(i for batch in batches for i in batch) == list(range(len(samples)))

    def tokens(index: int) -> int:
        return sum(min(len(samples[index][f].split()) + 2, 512) for f in ("src", "mt", "ref"))

    longest = [max(map(tokens, batch)) for batch in batches]
    assert longest == sorted(longest, reverse=True) and longest[0] == tokens(7) > 512
    sizes = zip(map(len, batches), longest, strict=True)
    assert all(count * most <= 1000 or count == 1 for count, most in sizes)
    assert len(batches) < len(samples) // 4  # batches of many segments, not one at a time
    # comet-score's batches: batch_size at a time, by the source's length in characters.
    fixed = CometMetric(batch_tokens=None, batch_size=16).batches(model, samples)
    assert [len(batch) for batch in fixed] == [16] * 12 + [8]
    assert [len(samples[i]["src"]) for batch in fixed for i in batch] == sorted(
        len(sample["src"]) for sample in samples
    )


def test_prefetch_takes_the_checkpoint_and_only_its_encoders_tokenizer_and_config(
    tmp_path: Path,
) -> None:
    metric = XComet(model="Unbabel/XCOMET-XL")
    assert metric.checkpoint_needs() == [
        HubFiles("Unbabel/XCOMET-XL", None, "xcomet.model", filename="hparams.yaml"),
        HubFiles("Unbabel/XCOMET-XL", None, "xcomet.model", filename="checkpoints/model.ckpt"),
    ]
    # A local checkpoint folder: nothing of its own to fetch, but its hub encoder's files.
    local = tmp_path / "xcomet-xl"
    (local / "checkpoints").mkdir(parents=True)
    (local / CHECKPOINT).write_bytes(b"")
    (local / HPARAMS).write_text(
        yaml.safe_dump(
            {"class_identifier": "xcomet_metric", "pretrained_model": "facebook/xlm-roberta-xl"}
        )
    )
    metric = XComet(model=str(local))
    assert metric.checkpoint_needs() == []
    assert metric.encoder_need() == HubFiles(
        "facebook/xlm-roberta-xl", None, "xcomet.model encoder", parts=("tokenizer",)
    )
    # An encoder that is a local folder needs nothing either.
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (local / HPARAMS).write_text(yaml.safe_dump({"pretrained_model": str(encoder)}))
    assert metric.encoder_need() is None
    shutil.rmtree(local / "checkpoints")
    with pytest.raises(FileNotFoundError, match=r"lacks checkpoints/model\.ckpt"):
        metric.encoder_need()
