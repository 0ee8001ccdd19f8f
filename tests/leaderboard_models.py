"""Leaderboard inputs made up for tests: models whose sentence scores are known."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bouquet_eval.core.stats import Resampling
from bouquet_eval.results.leaderboard import ModelResults

SMALL = Resampling(seed=3, bootstrap_resamples=200, ar_trials=200)
DIRECTIONS = [("eng_Latn", "fra_Latn"), ("fra_Latn", "eng_Latn"), ("fra_Latn", "deu_Latn")]


def synthetic_model(name: str, shift: float, noise: float, seed: int) -> ModelResults:
    """Sentence scores around 50 + shift per direction; 40 sentences per direction."""
    rng = np.random.default_rng(seed)
    base = np.random.default_rng(0).uniform(20, 80, size=40)  # the same sentences for all
    frames = []
    for offset, (src, tgt) in enumerate(DIRECTIONS):
        values = base + offset * 5 + shift + rng.normal(0, noise, size=40)
        frames.append(
            pd.DataFrame(
                {
                    "src_lang": src,
                    "tgt_lang": tgt,
                    "uniq_id": [f"s{i}" for i in range(40)],
                    "chrfpp": values,
                    "metricx": 25 - values / 4,
                }
            )
        )
    rows = pd.concat(frames, ignore_index=True)
    scores = (
        rows.groupby(["src_lang", "tgt_lang"], sort=True)
        .agg(
            n_sentences=("uniq_id", "size"), chrfpp=("chrfpp", "mean"), metricx=("metricx", "mean")
        )
        .reset_index()
    )
    return ModelResults(name, scores, rows)
