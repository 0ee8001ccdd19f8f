"""Aggregation from scored files: corpus scores from summed statistics, scored_rows.parquet."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from bouquet_eval.core.io import write_parquet
from bouquet_eval.core.stats import Resampling
from bouquet_eval.metrics import (
    Metric,
    corpus_metrics,
    is_statistics_column,
    load_metrics,
    metric_columns,
)
from bouquet_eval.results.aggregate import append_manifest, direction_scores, write_aggregates
from bouquet_eval.scoring.score import score_rows

from .conftest import SAMPLE, Workflow
from .workflow_configs import bounds_config

RESAMPLING = Resampling(seed=11, bootstrap_resamples=200)
CORPUS = {"chrfpp": CHRF(word_order=2), "bleu": BLEU(), "ter": TER()}
"""sacreBLEU's corpus-level metrics with its defaults."""
OUTPUTS = {
    "scores": "scores.csv",
    "summary": "summary.csv",
    "scored_rows": "scored_rows.parquet",
    "resampled": "resampled.npz",
}


class Noisy:
    """A metric of one's own whose scores are missing here and there."""

    name = "noisy"
    columns: tuple[str, ...] = ("noisy",)

    def signature(self) -> str:
        return "noisy"

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[float]]:
        rng = np.random.default_rng(len(rows))
        values = rng.uniform(0, 1, size=len(rows))
        values[rng.random(len(rows)) < 0.2] = np.nan
        return {"noisy": values.tolist()}


def metrics() -> list[Metric]:
    return [*load_metrics(["chrf", "bleu", "ter"], {}), Noisy()]


def write_scored(folder: Path, direction: str, sentences: int, seed: int, **extra) -> Path:
    rng = random.Random(seed)
    words = ["chat", "chien", "maison", "rouge", "le", "la", "dort", "mange", "vite", "Paris"]
    references = [
        " ".join(rng.choices(words, k=rng.randint(3, 12))) + "." for _ in range(sentences)
    ]
    translations = [
        " ".join(w if rng.random() < 0.7 else rng.choice(words) for w in text.split())
        for text in references
    ]
    src_lang, tgt_lang = direction.split("-")
    rows = pd.DataFrame(
        {
            "src_lang": src_lang,
            "tgt_lang": tgt_lang,
            "src_text": references,
            "ref_text": references,
            "mt_text": translations,
            "uniq_id": [f"s{i}" for i in range(sentences)],
        }
    )
    path = folder / f"{direction}.scored.parquet"
    write_parquet(path, score_rows(rows, metrics()).assign(**extra))
    return path


@pytest.fixture
def scored_files(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "model"
    return [
        write_scored(folder, "eng_Latn-fra_Latn", 40, seed=1, mt_raw="<think>x</think>"),
        write_scored(folder, "eng_Latn-deu_Latn", 37, seed=2, note=None),
        write_scored(folder, "fra_Latn-eng_Latn", 43, seed=3, note="checked"),
        write_scored(folder, "deu_Latn-fra_Latn", 40, seed=4),
    ]


def aggregate(paths: list[Path], folder: Path) -> pd.DataFrame:
    return write_aggregates(
        paths, metrics(), RESAMPLING, {name: folder / file for name, file in OUTPUTS.items()}
    )


def test_aggregates_sum_the_statistics_scoring_kept(scored_files: list[Path], tmp_path: Path):
    scores = aggregate(scored_files, tmp_path)
    rows = pd.concat([pd.read_parquet(path) for path in scored_files], ignore_index=True)
    corpus = corpus_metrics(metrics())
    in_memory = direction_scores(rows, metric_columns(metrics()), RESAMPLING, corpus)
    pd.testing.assert_frame_equal(scores, in_memory, check_exact=True)
    means = ("chrfpp", "bleu", "ter", "noisy")
    assert list(scores.columns[3:]) == [
        f"{column}{suffix}" for column in means for suffix in ("", "_ci_low", "_ci_high")
    ] + ["chrfpp_corpus", "bleu_corpus", "ter_corpus"]
    assert scores["noisy"].notna().all() and scores["noisy_ci_low"].notna().all()
    for line in scores.itertuples():
        direction = rows[(rows["src_lang"] == line.src_lang) & (rows["tgt_lang"] == line.tgt_lang)]
        assert line.n_sentences == len(direction)
        for column, metric in CORPUS.items():
            expected = metric.corpus_score(
                direction["mt_text"].tolist(), [direction["ref_text"].tolist()]
            ).score
            assert getattr(line, f"{column}_corpus") == pytest.approx(expected, abs=1e-9)
        assert line.bleu == pytest.approx(direction["bleu"].mean(), abs=1e-12)

    written = pd.read_csv(tmp_path / "scores.csv")
    pd.testing.assert_frame_equal(written, scores)
    summary = pd.read_csv(tmp_path / "summary.csv").set_index(["group_by", "group"])
    assert {"ter_ci_low", "ter_ci_high", "ter_corpus"} <= set(summary.columns)
    overall = summary.loc[("all", "all")]
    assert overall["ter_ci_low"] < overall["ter"] < overall["ter_ci_high"]

    # Every row, in the files' order, with the columns of all the files and no statistics.
    table = pq.read_table(tmp_path / "scored_rows.parquet")
    assert table.num_rows == len(rows)
    assert not any(is_statistics_column(name) for name in table.column_names)
    assert table.column_names == [c for c in rows.columns if not is_statistics_column(c)]
    together = table.to_pandas()
    pd.testing.assert_series_equal(together["mt_text"], rows["mt_text"], check_dtype=False)
    assert together["mt_raw"].notna().tolist() == [True] * 40 + [False] * 120
    assert together["note"].isna().tolist() == [True] * 77 + [False] * 43 + [True] * 40
    assert set(together["note"].dropna()) == {"checked"}
    np.testing.assert_array_equal(together["noisy"], rows["noisy"])


def test_files_scored_before_statistics_were_kept(
    scored_files: list[Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    expected = aggregate(scored_files, tmp_path / "now")
    for path in scored_files[1:3]:
        rows = pd.read_parquet(path)
        write_parquet(path, rows[[c for c in rows.columns if not is_statistics_column(c)]])
    with caplog.at_level(logging.WARNING):
        scores = aggregate(scored_files, tmp_path / "before")
    pd.testing.assert_frame_equal(scores, expected, check_exact=True)
    assert "2 directions were scored before the statistics of bleu, chrf, ter" in caplog.text


def test_each_direction_once_and_one_per_file(scored_files: list[Path], tmp_path: Path) -> None:
    again = tmp_path / "again" / "eng_Latn-fra_Latn.scored.parquet"
    again.parent.mkdir()
    again.write_bytes(scored_files[0].read_bytes())
    with pytest.raises(ValueError, match="direction eng_Latn-fra_Latn is scored twice"):
        aggregate([*scored_files, again], tmp_path)
    mixed = pd.concat([pd.read_parquet(path) for path in scored_files[:2]])
    write_parquet(scored_files[0], mixed)
    with pytest.raises(ValueError, match=rf"{scored_files[0]}: one direction expected"):
        aggregate(scored_files, tmp_path)


def test_bleu_and_ter_through_the_workflow(workflow: Workflow) -> None:
    directions = ["eng_Latn-fra_Latn", "eng_Latn-rus_Cyrl"]
    config = bounds_config(SAMPLE, directions={"list": directions}, metrics=["chrf", "bleu", "ter"])
    workflow.write_config({**config, "models": config["models"][:1], "shards": 1})
    workflow.run()
    folder = workflow.workdir / "runs" / "copy-source"
    scores = pd.read_csv(folder / "scores.csv")
    for line in scores.itertuples():
        scored = pd.read_parquet(folder / f"{line.src_lang}-{line.tgt_lang}.scored.parquet")
        assert sum(map(is_statistics_column, scored.columns)) == 24 + 10 + 2
        sentence_bleu = BLEU(effective_order=True)
        assert scored["bleu"].tolist() == [
            sentence_bleu.sentence_score(mt, [ref]).score
            for mt, ref in zip(scored["mt_text"], scored["ref_text"], strict=True)
        ]
        for column, metric in CORPUS.items():
            expected = metric.corpus_score(
                scored["mt_text"].tolist(), [scored["ref_text"].tolist()]
            )
            assert getattr(line, f"{column}_corpus") == pytest.approx(expected.score, abs=1e-9)
    summary = pd.read_csv(folder / "summary.csv")
    assert {"bleu_ci_low", "ter_ci_high", "bleu_corpus"} <= set(summary.columns)
    rows = pq.read_schema(folder / "scored_rows.parquet")
    assert not any(is_statistics_column(name) for name in rows.names)
    (entry,) = json.loads((folder / "manifest.json").read_text())["entries"]
    assert entry["metrics"]["bleu"].startswith("sentence nrefs:1|case:mixed|eff:yes|tok:13a")
    assert entry["metrics"]["ter"].startswith("nrefs:1|case:lc|tok:tercom")


def test_direction_scores_skip_missing_values(tmp_path: Path) -> None:
    rows = pd.DataFrame(
        {
            "src_lang": ["a_Latn"] * 3 + ["b_Latn"],
            "tgt_lang": ["c_Latn"] * 4,
            "metricx": [10.0, None, 30.0, 5.0],
        }
    )
    scores = direction_scores(rows, ["metricx"], Resampling(bootstrap_resamples=50))
    assert scores[["src_lang", "n_sentences", "metricx"]].to_dict(orient="records") == [
        {"src_lang": "a_Latn", "n_sentences": 3, "metricx": 20.0},
        {"src_lang": "b_Latn", "n_sentences": 1, "metricx": 5.0},
    ]
    manifest = tmp_path / "manifest.json"
    append_manifest(manifest, {"run": 1})
    append_manifest(manifest, {"run": 2})
    assert json.loads(manifest.read_text()) == {"entries": [{"run": 1}, {"run": 2}]}
