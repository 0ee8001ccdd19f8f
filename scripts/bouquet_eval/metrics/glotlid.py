"""GlotLID: is a translation written in its target language?

Two columns per sentence:
- `glotlid_pred`: GlotLID's most probable label, e.g. `fra_Latn` (no `__label__` prefix);
- `glotlid_score`: the probability GlotLID gives to the target language, whose BOUQuET code is
  first mapped to GlotLID's label set (`glotlid_label`). NaN, never 0, where the model has no
  label for it: the metric cannot tell, which is not the same as "wrong language".

The reference semantics are fastText's `predict(text, k=-1, threshold=0.0)`, with three choices:
- Newlines and carriage returns become spaces: fastText classifies one line, and refuses text
  with a newline, but a paragraph-level translation can have several.
- An empty or whitespace-only translation gets `glotlid_pred` "" and `glotlid_score` 0.0.
  fastText would classify the bare end-of-line token and answer the same, often confident,
  label for every empty line whatever its target; an empty translation is not in the target
  language, and 0 keeps the GlotLID x MetricX composite at 0 for it.
- `glotlid_score` is the model's probability itself. fastText's `predict` ranks labels by
  log(p + 1e-5) and reports exp of that, i.e. p + 1e-5, which reaches 1.00001.

GlotLID is a flat-softmax fastText model with word n-grams of length 1. For such a model the
probabilities are computed here rather than by `predict`: fastText's sentence vector is the mean
of the input-matrix rows of every word's subwords plus the end-of-line token, so per-word sums
of those rows are cached (`_WordSums`), and batches of sentence vectors go through the output
matrix and a softmax in numpy. This gives `predict`'s probabilities to float32 rounding, an order
of magnitude faster (benchmarks/cpu_metrics_throughput.py). Other models go through `predict`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Container, Mapping, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np
import pandas as pd

from bouquet_eval.core.languages import LanguageCode
from bouquet_eval.metrics.records import hub_file

log = logging.getLogger(__name__)

DEFAULT_MODEL = "cis-lmu/glotlid/model_v3.bin"

REMAP: Mapping[str, str] = MappingProxyType(
    {
        # Looked up before a variety suffix is stripped: this variety maps elsewhere.
        "apc_Arab_sout3123": "arz_Arab",
        # GlotLID v3 has one label per script family or merged language.
        "cmn_Hans": "cmn_Hani",
        "cmn_Hant": "cmn_Hani",
        "wuu_Hans": "wuu_Hani",
        "yue_Hant": "yue_Hani",
        "kor_Kore": "kor_Hang",
        "pes_Arab": "fas_Arab",
        "prs_Arab": "fas_Arab",
        "dgo_Deva": "doi_Deva",
        "acq_Arab": "arb_Arab",
        "khk_Mong": "und_Mong",
        # Renamed or replaced by an individual language in v3.
        "tgl_Latn": "fil_Latn",
        "est_Latn": "ekk_Latn",
        # Approximate: GlotLID has no zlm (Malay) label, only Standard Malay.
        "zlm_Latn": "zsm_Latn",
    }
)
"""BOUQuET code -> GlotLID v3 label where they differ, after GlotLID's languages-v3.md and its
FLORES map (assets/map/flores.json)."""

REMAP_VERSION = hashlib.sha256(json.dumps(sorted(REMAP.items())).encode()).hexdigest()[:8]
"""Changes whenever REMAP does, so that the signature invalidates scores computed with another."""

EOS = "</s>"
"""fastText's end-of-line token: every line ends with it, and a literal one ends the line."""

# What fastText's tokenizer splits on. All are ASCII, so splitting the str is the same as
# splitting its UTF-8 bytes, which is what fastText does.
_FASTTEXT_SEPARATORS = re.compile("[ \t\n\r\v\f\0]+")
# fastText's predict reports exp(log(p + 1e-5)) for a probability p.
_PREDICT_OFFSET = 1e-5


def glotlid_label(code: str) -> str:
    """The GlotLID label for a BOUQuET language code (`cmn_Hans` -> `cmn_Hani`).

    A variety suffix goes (`por_Latn_braz1246` -> `por_Latn`), then REMAP applies; a code that
    neither changes is its own label. The result may still be missing from the model.
    """
    if code in REMAP:
        return REMAP[code]
    base = LanguageCode.parse(code).base
    return REMAP.get(base, base)


class GlotLID:
    name = "glotlid"
    columns = ("glotlid_pred", "glotlid_score")

    def __init__(self, model: str = DEFAULT_MODEL, revision: str | None = None) -> None:
        """`model`: a local fastText .bin, or `<owner>/<repo>/<filename>` on the Hugging Face hub.

        A hub file is fetched on the first `score` call with `hf_hub_download`, which uses the
        cache and honours HF_HUB_OFFLINE. `revision` (a commit, branch or tag) is for hub files.
        """
        self.model = model
        self.revision = revision
        self._hub_file = (
            None if Path(model).expanduser().is_file() else hub_file(model, "GlotLID model")
        )
        if self._hub_file is None and revision is not None:
            raise ValueError(
                f"GlotLID model '{model}' is a local file: revision '{revision}' applies only "
                "to a Hugging Face hub file"
            )
        self._loaded: _Classifier | None = None
        self._warned: set[str] = set()

    def signature(self) -> str:
        fields = [f"model:{self.model}"]
        if self._hub_file is not None:
            fields.append(f"rev:{self.revision or 'main'}")
        fields += [f"remap:{REMAP_VERSION}", f"fasttext:{fasttext_binding()}"]
        return "|".join(fields)

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[Any]]:
        classifier = self._classifier()
        texts = [_one_line(text) for text in rows["mt_text"]]
        targets = rows["tgt_lang"].tolist()
        label_of = {code: glotlid_label(code) for code in set(targets)}
        self._warn_unlabelled(label_of, classifier.index)
        expected = np.array(
            [classifier.index.get(label_of[code], -1) for code in targets], dtype=int
        )
        present = np.flatnonzero([bool(text.strip()) for text in texts])
        top, probability = classifier.classify([texts[i] for i in present], expected[present])
        scores = np.where(expected >= 0, 0.0, np.nan)
        scores[present] = probability
        predictions = [""] * len(texts)
        for row, label in zip(present, top, strict=True):
            predictions[row] = classifier.labels[label]
        return {"glotlid_pred": predictions, "glotlid_score": scores.tolist()}

    def _classifier(self) -> _Classifier:
        if self._loaded is None:
            self._loaded = _load_classifier(self._model_path())
        return self._loaded

    def _model_path(self) -> Path:
        if self._hub_file is None:
            return Path(self.model).expanduser()
        from huggingface_hub import hf_hub_download

        repo_id, filename = self._hub_file
        try:
            return Path(hf_hub_download(repo_id, filename, revision=self.revision))
        except Exception as error:
            raise RuntimeError(
                f"GlotLID model '{self.model}' is not a local file, and fetching '{filename}' "
                f"from the Hugging Face hub repository '{repo_id}' failed: {error}"
            ) from error

    def _warn_unlabelled(self, label_of: Mapping[str, str], labels: Container[str]) -> None:
        """One warning per call for the target languages not warned about before."""
        unlabelled = sorted(code for code, label in label_of.items() if label not in labels)
        new = [code for code in unlabelled if code not in self._warned]
        if new:
            self._warned.update(new)
            log.warning(
                "GlotLID (%s) has no label for %s: their glotlid_score is NaN",
                self.model,
                ", ".join(f"{code} ({label_of[code]})" for code in new),
            )


@cache
def fasttext_binding() -> str:
    """The installed distribution(s) providing the `fasttext` module, found without importing it.

    Several fastText bindings share the module name and differ in numpy support.
    """
    names = sorted(metadata.packages_distributions().get("fasttext", []))
    return "+".join(f"{name}=={metadata.version(name)}" for name in names) or "missing"


def _one_line(text: str) -> str:
    """`text` as the one line that fastText reads."""
    return text.replace("\n", " ").replace("\r", " ")


class _Classifier(Protocol):
    # Read-only, so that a classifier may hold them as a list and a dict.
    @property
    def labels(self) -> Sequence[str]: ...

    @property
    def index(self) -> Mapping[str, int]:
        """Position of each label in `labels`."""
        ...

    def classify(self, texts: Sequence[str], expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each text, its top label's position and the probability of `expected` there.

        `expected` holds label positions, -1 for none; its probability is then NaN.
        """
        ...


def _load_classifier(path: Path) -> _Classifier:
    if not path.is_file():
        raise FileNotFoundError(f"GlotLID model file '{path}' does not exist")
    # Imported here: constructing a GlotLID (for its signature) must not need fastText.
    try:
        import fasttext
    except ImportError as error:
        raise ImportError(
            "GlotLID needs a fastText binding; with numpy 2, pip install fasttext-numpy2-wheel"
        ) from error
    model = fasttext.load_model(str(path))
    arguments = model.f.getArgs()
    direct = (
        arguments.loss.name == "softmax"
        and arguments.wordNgrams <= 1
        and not model.is_quantized()
        and model.get_word_id(EOS) >= 0
    )
    classifier = _SoftmaxClassifier(model) if direct else _PredictClassifier(model)
    log.info(
        "GlotLID: loaded %s, %d labels, %s loss; scoring with %s",
        path,
        len(classifier.labels),
        arguments.loss.name,
        "sentence vectors and a softmax in numpy" if direct else "fastText's predict",
    )
    return classifier


def _labels(model: Any) -> list[str]:
    prefix = model.f.getArgs().label
    return [label.removeprefix(prefix) for label in model.labels]


class _PredictClassifier:
    """fastText's own `predict`, for models the direct computation does not cover."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._prefix = model.f.getArgs().label
        self.labels = _labels(model)
        self.index = {label: position for position, label in enumerate(self.labels)}

    def classify(self, texts: Sequence[str], expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        all_labels, all_probabilities = self._model.predict(list(texts), k=-1, threshold=0.0)
        top = np.array(
            [self.index[labels[0].removeprefix(self._prefix)] for labels in all_labels], dtype=int
        )
        probability = np.full(len(texts), np.nan)
        for row, (labels, probabilities, wanted) in enumerate(
            zip(all_labels, all_probabilities, expected, strict=True)
        ):
            if wanted >= 0:
                reported = dict(zip(labels, probabilities, strict=True))
                p = reported[self._prefix + self.labels[wanted]] - _PREDICT_OFFSET
                probability[row] = min(max(p, 0.0), 1.0)
        return top, probability


class _SoftmaxClassifier:
    """A flat-softmax model's probabilities from sentence vectors and the output matrix."""

    batch_size = 256
    """Sentences per matrix product: large enough for BLAS, small enough to stay in cache."""

    def __init__(self, model: Any, cached_words: int = 1 << 17) -> None:
        self.labels = _labels(model)
        self.index = {label: position for position, label in enumerate(self.labels)}
        self._output = model.get_output_matrix()
        self._word_sums = _WordSums(model, cached_words)

    def classify(self, texts: Sequence[str], expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        top = np.empty(len(texts), dtype=int)
        probability = np.empty(len(texts))
        hidden = np.empty((self.batch_size, self._output.shape[1]), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            for row, text in enumerate(batch):
                self._word_sums.sentence_vector(text, out=hidden[row])
            logits = hidden[: len(batch)] @ self._output.T
            batch_top, batch_probability = _softmax_at(logits, expected[start : start + len(batch)])
            top[start : start + len(batch)] = batch_top
            probability[start : start + len(batch)] = batch_probability
        return top, probability


def _softmax_at(logits: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's argmax and its softmax probability at `columns` (NaN where -1); in place."""
    rows = np.arange(len(logits))
    top = logits.argmax(axis=1)
    logits -= logits[rows, top][:, None]
    np.exp(logits, out=logits)
    probability = logits[rows, columns] / logits.sum(axis=1)
    return top, np.where(columns >= 0, probability, np.nan)


class _WordSums:
    """fastText sentence vectors from cached per-word sums of input-matrix rows.

    fastText averages the input rows of each word's subwords (the word itself when in the
    vocabulary, and its hashed character n-grams) and of the end-of-line token. A word's rows
    are the same wherever it occurs, so their sum and count are kept per word, and a sentence
    costs a few vector additions instead of hundreds of scattered row reads. The cache holds
    `capacity` words and starts afresh when full.
    """

    def __init__(self, model: Any, capacity: int) -> None:
        self._model = model
        arguments = model.f.getArgs()
        self._prefix = arguments.label
        self._minn, self._maxn = arguments.minn, arguments.maxn
        self._capacity = capacity
        self._rows: dict[str, int] = {}
        # Untouched pages of np.empty cost no memory, so a small job stays small.
        self._sums = np.empty((capacity, model.get_dimension()), dtype=np.float32)
        self._counts = np.empty(capacity, dtype=np.float32)

    def sentence_vector(self, text: str, out: np.ndarray) -> None:
        words = self._words(text)
        if len(words) > self._capacity:
            out[:] = self._model.get_sentence_vector(text)
            return
        if len(self._rows) + len(words) > self._capacity:
            self._rows.clear()
        rows = [self._rows[word] if word in self._rows else self._add(word) for word in words]
        self._sums.take(rows, axis=0).sum(axis=0, out=out)
        out /= self._counts.take(rows).sum()

    def _words(self, text: str) -> list[str]:
        """The tokens fastText's predict reads: label-like tokens dropped, up to </s>."""
        words = [
            word
            for word in _FASTTEXT_SEPARATORS.split(text)
            if word and not word.startswith(self._prefix)
        ]
        if EOS in words:
            del words[words.index(EOS) + 1 :]
        else:
            words.append(EOS)
        return words

    def _add(self, word: str) -> int:
        row = len(self._rows)
        # get_word_vector is the mean over the same rows that a sentence adds for this word.
        count = self._row_count(word)
        self._sums[row] = self._model.get_word_vector(word) * count
        self._counts[row] = count
        self._rows[word] = row
        return row

    def _row_count(self, word: str) -> int:
        """How many input rows fastText adds for `word` (what `get_subwords` lists, but faster).

        Its own row when in the vocabulary, and one per character n-gram of "<word>" from minn
        to maxn characters long, except the lone "<" and ">"; the end-of-line token has only
        its own row.
        """
        if word == EOS:
            return 1
        wrapped = len(word) + 2  # fastText counts UTF-8 characters: code points
        lengths = range(max(self._minn, 1), min(self._maxn, wrapped) + 1)
        ngrams = sum(wrapped - length + 1 for length in lengths)
        if self._minn <= 1 <= self._maxn:
            ngrams -= 2
        return ngrams + (self._model.get_word_id(word) >= 0)
