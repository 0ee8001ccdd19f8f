"""GlotLID metric, against a tiny GlotLID-style fastText model trained offline (tiny_fasttext)."""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bouquet_eval.metrics import Metric, load_metric
from bouquet_eval.metrics.glotlid import REMAP_VERSION, GlotLID, fasttext_binding, glotlid_label
from tests.hf_cache import COMMIT, cache_entry
from tests.tiny_fasttext import TINY_LANGUAGES, build_tiny_model

LOGGER = "bouquet_eval.metrics.glotlid"
# fastText's predict reports p + 1e-5; glotlid_score is p (see the module docstring).
PREDICT_OFFSET = 1e-5
TOLERANCE = 1e-6

# Target codes whose label the tiny model has, directly or after remapping, and two it lacks.
LABELLED = [
    "eng_Latn",
    "fra_Latn",
    "spa_Latn",
    "deu_Latn",
    "rus_Cyrl",
    "cmn_Hans",
    "cmn_Hant",
    "por_Latn_braz1246",
    "kor_Kore",
    "tgl_Latn",
    "pes_Arab",
]
UNLABELLED = ["bft_Arab", "ita_Latn"]

# Inputs where fastText's tokenizer has rules of its own: every separator it knows, Unicode
# spaces it does not split on, label-like tokens it drops, a literal end-of-line token that
# ends the line, and words it has never seen.
AWKWARD = [
    "the\thouse\vriver\fnight\x00garden",
    "the\u00a0house the\u3000river",
    "  the house   river  ",
    "__label__eng_Latn le chat __label__ la maison",
    "la maison </s> the house the river",
    "</s>",
    "__label__fra_Latn",
    "x" * 300,
    "😀 今天 🙂 Straße",
    "12345 !!! ???",
    "q",
]

BuildModel = Callable[..., Path]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> BuildModel:
    """`tiny_model(loss="softmax", minn=2, maxn=5)`: a tiny model, trained once per session."""
    pytest.importorskip("fasttext")
    models: dict[tuple[str, int, int], Path] = {}

    def build(loss: str = "softmax", minn: int = 2, maxn: int = 5) -> Path:
        key = (loss, minn, maxn)
        if key not in models:
            path = tmp_path_factory.mktemp(f"{loss}-{minn}-{maxn}") / "model.bin"
            models[key] = build_tiny_model(path, loss=loss, minn=minn, maxn=maxn)
        return models[key]

    return build


def sentences(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(TINY_LANGUAGES).sentence(rng, rng.randint(1, 30)) for _ in range(count)]


def frame(texts: Sequence[str], targets: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "src_lang": "eng_Latn",
            "tgt_lang": list(targets),
            "src_text": "source",
            "ref_text": "reference",
            "mt_text": list(texts),
        }
    )


@functools.cache
def fasttext_model(path: Path) -> Any:
    import fasttext

    return fasttext.load_model(str(path))


def fasttext_predictions(path: Path, text: str) -> dict[str, float]:
    labels, probabilities = fasttext_model(path).predict(text, k=-1, threshold=0.0)
    return {
        label.removeprefix("__label__"): float(p)
        for label, p in zip(labels, probabilities, strict=True)
    }


def fasttext_top(path: Path, text: str) -> str:
    predictions = fasttext_predictions(path, text)
    return max(predictions, key=predictions.__getitem__)


@pytest.mark.parametrize(
    ("code", "label"),
    [
        ("cmn_Hans", "cmn_Hani"),
        ("cmn_Hant", "cmn_Hani"),
        ("yue_Hant", "yue_Hani"),
        ("kor_Kore", "kor_Hang"),
        ("pes_Arab", "fas_Arab"),
        ("tgl_Latn", "fil_Latn"),
        ("zlm_Latn", "zsm_Latn"),
        ("est_Latn", "ekk_Latn"),
        ("por_Latn_braz1246", "por_Latn"),
        ("cat_Latn_vale1252", "cat_Latn"),
        ("apc_Arab_nort3139", "apc_Arab"),
        ("apc_Arab_sout3123", "arz_Arab"),
        ("twi_Latn_akua1239", "twi_Latn"),
        ("eng_Latn", "eng_Latn"),
        ("bft_Arab", "bft_Arab"),
    ],
)
def test_glotlid_label(code: str, label: str) -> None:
    assert glotlid_label(code) == label


@pytest.mark.parametrize(
    ("loss", "minn", "maxn", "strategy"),
    [
        ("softmax", 2, 5, "sentence vectors"),  # GlotLID's settings
        # Single characters count too (minn 0 acts as 1), except the "<" and ">" around words.
        ("softmax", 0, 3, "sentence vectors"),
        # Whole words only, unknown ones adding nothing. (maxn 0 says the same, but fastText
        # 0.9.2 trains such a model differently on every run, sometimes into NaN.)
        ("softmax", 3, 2, "sentence vectors"),
        ("ova", 2, 5, "fastText's predict"),
    ],
)
def test_scores_are_fasttexts_probabilities(
    tiny_model: BuildModel,
    loss: str,
    minn: int,
    maxn: int,
    strategy: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tiny_model(loss, minn, maxn)
    texts = sentences(400) + AWKWARD
    codes = LABELLED + UNLABELLED
    targets = [codes[i % len(codes)] for i in range(len(texts))]
    rows = frame(texts, targets)
    rows.index = range(len(rows), 0, -1)  # scores follow row order, not index labels
    with caplog.at_level(logging.INFO, logger=LOGGER):
        scores = GlotLID(str(path)).score(rows)
    assert any(strategy in record.getMessage() for record in caplog.records)
    assert len(scores["glotlid_pred"]) == len(scores["glotlid_score"]) == len(texts)
    for text, target, predicted, score in zip(
        texts, targets, scores["glotlid_pred"], scores["glotlid_score"], strict=True
    ):
        assert predicted == fasttext_top(path, text), text
        if target in UNLABELLED:
            assert math.isnan(score)
        else:
            reported = fasttext_predictions(path, text)[glotlid_label(target)]
            assert score == pytest.approx(reported - PREDICT_OFFSET, abs=TOLERANCE), (text, target)


def test_remapped_codes_score_against_glotlid_labels(tiny_model: BuildModel) -> None:
    path = tiny_model()
    cases = [
        ("今天天气很好我们喜欢花园", ["cmn_Hans", "cmn_Hant", "cmn_Hani"], "cmn_Hani"),
        ("o meu irmão não está em casa", ["por_Latn_braz1246", "por_Latn"], "por_Latn"),
        ("오늘 날씨가 좋아요 친구", ["kor_Kore", "kor_Hang"], "kor_Hang"),
        ("salamat sa tubig kaibigan", ["tgl_Latn", "fil_Latn"], "fil_Latn"),
        ("امروز هوا خوب است", ["pes_Arab", "fas_Arab"], "fas_Arab"),
    ]
    texts = [text for text, codes, _ in cases for _ in codes]
    targets = [code for _, codes, _ in cases for code in codes]
    scores = iter(GlotLID(str(path)).score(frame(texts, targets))["glotlid_score"])
    for text, codes, label in cases:
        expected = fasttext_predictions(path, text)[label] - PREDICT_OFFSET
        assert fasttext_top(path, text) == label  # the case is meaningful: P(label) is high
        for code in codes:
            assert next(scores) == pytest.approx(expected, abs=TOLERANCE), code


def test_language_without_label_is_nan_with_one_warning(
    tiny_model: BuildModel, caplog: pytest.LogCaptureFixture
) -> None:
    metric = GlotLID(str(tiny_model()))
    texts = ["la casa es bonita", "il bosco", "the house", "ہمارا گھر"]
    targets = ["ita_Latn", "ita_Latn", "eng_Latn", "bft_Arab"]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        scores = metric.score(frame(texts, targets))
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1
    assert "bft_Arab" in warnings[0] and "ita_Latn" in warnings[0]
    assert [math.isnan(score) for score in scores["glotlid_score"]] == [True, True, False, True]
    assert all(scores["glotlid_pred"])  # the prediction is still made

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        metric.score(frame([*texts, "bonjour"], [*targets, "gsw_Latn"]))
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1
    assert "gsw_Latn" in warnings[0] and "ita_Latn" not in warnings[0]


@pytest.mark.parametrize("loss", ["softmax", "ova"])
def test_multiline_hypotheses_are_scored_as_one_line(tiny_model: BuildModel, loss: str) -> None:
    path = tiny_model(loss)
    multiline = "le chat est\ndans la maison\r\navec le chien\r"
    with pytest.raises(ValueError, match="one line"):
        fasttext_model(path).predict(multiline)
    scores = GlotLID(str(path)).score(
        frame([multiline, multiline.replace("\n", " ").replace("\r", " ")], ["fra_Latn"] * 2)
    )
    assert scores["glotlid_pred"] == ["fra_Latn", "fra_Latn"]
    assert scores["glotlid_score"][0] == scores["glotlid_score"][1] > 0.5


def test_empty_hypotheses_score_zero(tiny_model: BuildModel) -> None:
    path = tiny_model()
    # What fastText would say: the same label for any empty line, whatever its target.
    assert fasttext_predictions(path, "") == fasttext_predictions(path, " \t ")
    texts = ["", "   ", "\n", " \r\n\t", "\u3000", "the house", ""]
    targets = ["eng_Latn"] * 6 + ["bft_Arab"]
    scores = GlotLID(str(path)).score(frame(texts, targets))
    assert scores["glotlid_pred"] == ["", "", "", "", "", "eng_Latn", ""]
    assert scores["glotlid_score"][:5] == [0.0] * 5
    assert scores["glotlid_score"][5] > 0.5
    assert math.isnan(scores["glotlid_score"][6])


@pytest.mark.parametrize("loss", ["softmax", "ova"])
def test_nothing_to_classify(tiny_model: BuildModel, loss: str) -> None:
    metric = GlotLID(str(tiny_model(loss)))
    assert metric.score(frame([], [])) == {"glotlid_pred": [], "glotlid_score": []}
    assert metric.score(frame(["", " "], ["fra_Latn"] * 2)) == {
        "glotlid_pred": ["", ""],
        "glotlid_score": [0.0, 0.0],
    }


def test_model_is_loaded_once(tiny_model: BuildModel, tmp_path: Path) -> None:
    path = Path(shutil.copy(tiny_model(), tmp_path / "model.bin"))
    metric = GlotLID(str(path))
    rows = frame(sentences(20), ["fra_Latn"] * 20)
    first = metric.score(rows)
    path.unlink()  # a second load would fail now
    assert metric.score(rows) == first


def test_word_cache_smaller_than_a_sentence(tiny_model: BuildModel) -> None:
    """Filling the per-word cache, even within one sentence, does not change the scores."""
    import numpy as np

    from bouquet_eval.metrics.glotlid import _SoftmaxClassifier

    model = fasttext_model(tiny_model())
    texts = [*sentences(60, seed=1), " ".join(sentences(5, seed=2))]
    expected = np.zeros(len(texts), dtype=int)
    ample_top, ample = _SoftmaxClassifier(model).classify(texts, expected)
    small_top, small = _SoftmaxClassifier(model, cached_words=8).classify(texts, expected)
    assert (small_top == ample_top).all()
    assert np.allclose(small, ample, rtol=0, atol=TOLERANCE)


def test_is_a_registered_metric(tiny_model: BuildModel) -> None:
    path = str(tiny_model())
    metric = load_metric("glotlid", {"model": path})
    assert isinstance(metric, Metric)
    assert metric.columns == ("glotlid_pred", "glotlid_score")
    assert metric.signature() == f"model:{path}|remap:{REMAP_VERSION}|fasttext:{fasttext_binding()}"


def test_hub_spec_signature_and_binding() -> None:
    metric = GlotLID("cis-lmu/glotlid/model_v3.bin", revision="abc123")
    assert metric.signature().startswith("model:cis-lmu/glotlid/model_v3.bin|rev:abc123|remap:")
    assert GlotLID().signature().startswith("model:cis-lmu/glotlid/model_v3.bin|rev:main|")
    pytest.importorskip("fasttext")
    assert fasttext_binding().startswith("fasttext")


@pytest.mark.parametrize("spec", ["no-such-model.bin", "/no/such/dir/model.bin", "owner/repo", ""])
def test_bad_spec(spec: str) -> None:
    with pytest.raises(ValueError, match="neither an existing file nor a Hugging Face hub file"):
        GlotLID(spec)


def test_revision_with_local_file(tiny_model: BuildModel) -> None:
    with pytest.raises(ValueError, match="applies only to a Hugging Face hub file"):
        GlotLID(str(tiny_model()), revision="main")


def run_python(code: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_construction_imports_neither_fasttext_nor_the_hub(tiny_model: BuildModel) -> None:
    code = f"""
import json, sys
from bouquet_eval.metrics.glotlid import GlotLID
for metric in (GlotLID({str(tiny_model())!r}), GlotLID()):
    metric.signature()
print(json.dumps(["fasttext" in sys.modules, "huggingface_hub" in sys.modules]))
"""
    assert json.loads(run_python(code)) == [False, False]


def test_missing_fasttext_is_explained(tiny_model: BuildModel) -> None:
    code = f"""
import sys
sys.modules["fasttext"] = None  # as if no binding were installed
import pandas as pd
from bouquet_eval.metrics.glotlid import GlotLID
try:
    GlotLID({str(tiny_model())!r}).score(pd.DataFrame({{"tgt_lang": ["x"], "mt_text": ["y"]}}))
except ImportError as error:
    print(error)
"""
    assert "pip install fasttext-numpy2-wheel" in run_python(code)


def test_hub_file_from_offline_cache(tiny_model: BuildModel, tmp_path: Path) -> None:
    """A hub spec resolves through a pre-filled Hugging Face cache with HF_HUB_OFFLINE=1."""
    path = tiny_model()
    commit = COMMIT
    cache_entry(tmp_path / "hf" / "hub", "someone/tiny-lid", {"model.bin": path.read_bytes()})
    texts = sentences(30)
    targets = [LABELLED[i % len(LABELLED)] for i in range(len(texts))]
    code = f"""
import json
import pandas as pd
from bouquet_eval.metrics.glotlid import GlotLID
rows = pd.DataFrame({{"tgt_lang": {targets!r}, "mt_text": {texts!r}}})
results = [
    GlotLID("someone/tiny-lid/model.bin", revision=revision).score(rows)
    for revision in (None, {commit!r})
]
try:
    GlotLID("someone/tiny-lid/other.bin").score(rows)
except RuntimeError as error:
    results.append(str(error))
print(json.dumps(results))
"""
    # HF_HUB_CACHE too, as it would win over HF_HOME if the environment set it.
    offline = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
        "HF_HUB_OFFLINE": "1",
    }
    by_default, by_commit, missing = json.loads(run_python(code, offline))
    local = GlotLID(str(path)).score(frame(texts, targets))
    assert by_default == by_commit == local
    assert "is not a local file" in missing and "someone/tiny-lid" in missing
