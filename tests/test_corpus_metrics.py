"""chrF++, BLEU and TER: sacreBLEU's sentence and corpus scores from one pass of statistics."""

from __future__ import annotations

import random

import pandas as pd
import pyarrow as pa
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from bouquet_eval.metrics import (
    STATISTICS_PREFIX,
    CorpusMetric,
    is_statistics_column,
    load_metric,
    load_metrics,
    metric_columns,
)
from bouquet_eval.metrics.records import RECORDS
from bouquet_eval.planning.schema import load_schema
from bouquet_eval.scoring.score import score_rows, scored_table

from .conftest import REPOSITORY

# Short sentences (BLEU's effective order), an empty translation, an empty reference, case
# (TER ignores it), punctuation, a trailing space (BLEU strips it), non-Latin scripts.
PAIRS = [
    ("The cat sleeps on the mat.", "The cat is sleeping on the mat."),
    ("Hello", "Hello !"),
    ("", "Nothing came out."),
    ("Something came out.", ""),
    ("THE DOG BARKS", "the dog barks"),
    ("Le chat (noir) dort, enfin.  ", "Le chat noir dort enfin."),
    ("猫在垫子上睡觉。", "猫睡在垫子上。"),
    ("Кошка спит на коврике", "Кошка спит на ковре"),
    ("a b c d e f g", "a b c d e f g"),
]
ROWS = pd.DataFrame(PAIRS, columns=["mt_text", "ref_text"])
SENTENCE = {
    "chrf": CHRF(word_order=2),
    "bleu": BLEU(effective_order=True),
    "ter": TER(),
}
"""sacreBLEU's own objects with its defaults, and the sentence-level BLEU it recommends."""
CORPUS = {"chrf": CHRF(word_order=2), "bleu": BLEU(), "ter": TER()}


@pytest.mark.parametrize("name", ["chrf", "bleu", "ter"])
def test_scores_are_sacrebleus_sentence_and_corpus_scores(name: str) -> None:
    metric = load_metric(name)
    assert isinstance(metric, CorpusMetric)
    (column,) = metric.columns
    scored = metric.score(ROWS)
    assert scored[column] == [SENTENCE[name].sentence_score(mt, [ref]).score for mt, ref in PAIRS]
    # The corpus score from the summed statistics, of the whole corpus and of parts of it.
    for part in (slice(None), slice(0, 3), slice(4, 5)):
        totals = [sum(scored[c][part]) for c in metric.statistics_columns]
        hypotheses, references = zip(*PAIRS[part], strict=True)
        expected = CORPUS[name].corpus_score(list(hypotheses), [list(references)]).score
        assert metric.corpus_score(totals) == expected
    # An empty corpus has no statistics, and leaves the signature's one reference alone.
    assert metric.statistics(ROWS.iloc[:0]) == []
    assert "nrefs:1|" in metric.signature()


def made_up_pairs(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """Sentences of words from a small vocabulary of several scripts, with punctuation around and
    inside words, runs of spaces and tabs, and now and then an empty one."""
    rng = random.Random(seed)
    words = ["the", "cat", "Cat", "(noir)", "dort,", "enfin.", "猫", "垫子上", "Кошка", "спит"]
    words += ["'", "-", "a.b", "x", "ünïcödé", "١٢٣", "n't", "...", "😀", "e\u0301"]

    def sentence() -> str:
        if rng.random() < 0.05:
            return rng.choice(["", " ", "\t"])
        spaces = rng.choices([" ", "  ", "\t", " \n "], weights=[20, 2, 1, 1], k=30)
        chosen = rng.choices(words, k=rng.randint(1, 15))
        return "".join(word + space for word, space in zip(chosen, spaces, strict=False))

    return [(sentence(), sentence()) for _ in range(count)]


@pytest.mark.parametrize("name", ["chrf", "bleu", "ter"])
def test_statistics_and_scores_are_sacrebleus_on_many_sentences(name: str) -> None:
    """Each sentence's statistics are those of sacreBLEU's own extraction, and its score
    sentence_score's, to the last bit."""
    metric = load_metric(name)
    assert isinstance(metric, CorpusMetric)
    pairs = made_up_pairs(300)
    rows = pd.DataFrame(pairs, columns=["mt_text", "ref_text"])
    extracted = SENTENCE[name]._extract_corpus_statistics
    assert metric.statistics(rows) == [extracted([mt], [[ref]])[0] for mt, ref in pairs]
    expected = [SENTENCE[name].sentence_score(mt, [ref]).score for mt, ref in pairs]
    assert metric.score(rows)[metric.corpus_column] == expected


def test_signatures_write_down_every_default() -> None:
    signatures = {name: load_metric(name).signature() for name in ("chrf", "bleu", "ter")}
    assert signatures == {
        "chrf": "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0",
        "bleu": "sentence nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0; "
        "corpus nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "ter": "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:2.6.0",
    }


def test_statistics_columns_are_kept_apart_from_scores() -> None:
    metrics = load_metrics(["chrf", "bleu", "ter"], {})
    rows = ROWS.assign(src_lang="eng_Latn", tgt_lang="fra_Latn")
    scored = score_rows(rows, metrics)
    assert metric_columns(metrics) == ["chrfpp", "bleu", "ter"]
    statistics = [c for c in scored.columns if is_statistics_column(c)]
    assert list(scored.columns) == [*rows.columns, "chrfpp", "bleu", "ter", *statistics]
    assert statistics == [
        *(f"{STATISTICS_PREFIX}chrfpp:{i}" for i in range(24)),
        *(f"{STATISTICS_PREFIX}bleu:{i}" for i in range(10)),
        *(f"{STATISTICS_PREFIX}ter:{i}" for i in range(2)),
    ]
    assert not any(is_statistics_column(c) for m in metrics for c in m.columns)
    # Counts stay integers; TER's reference length is sacreBLEU's float.
    assert (scored[statistics[:-1]].dtypes == "int64").all()
    assert scored[statistics[-1]].dtype == "float64"


def test_schema_accepts_exactly_the_built_in_metrics() -> None:
    schema = load_schema(REPOSITORY / "workflow" / "schemas" / "config.schema.yaml")
    (built_in, _own) = schema["properties"]["metrics"]["items"]["anyOf"]
    assert built_in["enum"] == list(RECORDS)


def test_scored_files_hold_the_scored_rows_with_their_types() -> None:
    """The score job writes its table through arrow, not through `score_rows`' frame: the same
    columns, values and types (TER's float statistic, strings as pandas writes them)."""
    metrics = load_metrics(["chrf", "bleu", "ter"], {})
    rows = ROWS.assign(src_lang="eng_Latn", tgt_lang="fra_Latn", uniq_id=range(len(ROWS)))
    table = scored_table(rows, metrics)
    expected = pa.Table.from_pandas(score_rows(rows, metrics), preserve_index=False)
    assert table.schema.equals(expected.schema, check_metadata=False)
    assert table.equals(expected)
