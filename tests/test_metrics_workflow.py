"""chrF++, MetricX-24 and GlotLID together through the workflow, on tiny real models."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from bouquet_eval.metrics.glotlid import GlotLID
from bouquet_eval.metrics.metricx import MetricX

from .conftest import SAMPLE, Workflow
from .tiny_fasttext import build_tiny_model
from .tiny_mt5 import build_tiny_mt5
from .workflow_configs import bounds_config

DIRECTIONS = ["eng_Latn-fra_Latn", "eng_Latn-cmn_Hans", "eng_Latn-arb_Arab", "hin_Deva-eng_Latn"]


@pytest.fixture(scope="module")
def tiny_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("metrics")
    checkpoint = build_tiny_mt5(folder / "metricx")
    lid = build_tiny_model(folder / "lid.bin")
    return {
        "metricx": {
            "model": str(checkpoint.model),
            "tokenizer": str(checkpoint.tokenizer),
            "device": "cpu",
            "batch_tokens": 512,
        },
        "glotlid": {"model": str(lid)},
    }


def test_all_metrics_and_the_composite(workflow: Workflow, tiny_metrics: dict) -> None:
    workflow.write_config(
        bounds_config(
            SAMPLE,
            directions={"list": DIRECTIONS},
            metrics=["chrf", "metricx", "glotlid"],
            **tiny_metrics,
        )
    )
    workflow.run(env={"HF_HUB_OFFLINE": "1"})
    folder = workflow.workdir / "runs" / "copy-source"
    metricx = MetricX(**tiny_metrics["metricx"])
    glotlid = GlotLID(**tiny_metrics["glotlid"])
    for direction in DIRECTIONS:
        scored = pd.read_parquet(folder / f"{direction}.scored.parquet")
        np.testing.assert_allclose(scored["metricx"], metricx.score(scored)["metricx"], atol=1e-5)
        expected_lid = glotlid.score(scored)
        assert scored["glotlid_pred"].tolist() == expected_lid["glotlid_pred"]
        np.testing.assert_allclose(scored["glotlid_score"], expected_lid["glotlid_score"])
        assert scored["metricx"].between(0, 25).all()
        composite = scored["glotlid_score"] * (1 - np.sqrt(scored["metricx"] / 25))
        np.testing.assert_allclose(scored["glotlid_x_metricx"], composite)
        no_label = direction.endswith("arb_Arab")  # the tiny LID model has no Arabic
        assert scored["glotlid_score"].isna().all() == no_label
        assert scored["glotlid_x_metricx"].isna().all() == no_label

    scores = pd.read_csv(folder / "scores.csv").set_index(["src_lang", "tgt_lang"])
    for column in ("chrfpp", "metricx", "glotlid_score", "glotlid_x_metricx"):
        assert {column, f"{column}_ci_low", f"{column}_ci_high"} <= set(scores.columns)
    assert "glotlid_pred" not in scores.columns
    assert math.isnan(scores.loc[("eng_Latn", "arb_Arab"), "glotlid_score"])
    into_french = scores.loc[("eng_Latn", "fra_Latn")]
    assert into_french["metricx_ci_low"] <= into_french["metricx"] <= into_french["metricx_ci_high"]
    summary = pd.read_csv(folder / "summary.csv")
    assert {"metricx", "glotlid_score", "glotlid_x_metricx"} <= set(summary.columns)
    logs = "".join(
        p.read_text() for p in (workflow.workdir / "logs" / "copy-source").rglob("*.log")
    )
    assert "arb_Arab" in logs  # the warning naming the language GlotLID cannot score

    # Removing a metric starts no score job, of its family (MetricX's and GlotLID's) or
    # another: the scored files are gathered again, and the aggregates follow.
    workflow.write_config(
        bounds_config(
            SAMPLE, directions={"list": DIRECTIONS}, metrics=["chrf", "metricx"], **tiny_metrics
        )
    )
    planned = workflow.planned_jobs(env={"HF_HUB_OFFLINE": "1"})
    scoring = [rule for rule in planned if rule.startswith("score_")]
    gathering = re.compile(r"score_(copy_source|reference)_shard\d+of\d+")
    assert scoring and all(gathering.fullmatch(rule) for rule in scoring), planned
