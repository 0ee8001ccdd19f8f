"""Every statistic correlations.csv names after MT Metrics Eval equals MTME's own code.

MTME's outputs on the tables of `mtme_oracle` (complete, and with 10%, 30% and 60% of the
judgements missing, with ties) are recorded with the commit they came from in
`mtme_statistics.json`; `python -m tests.mtme_oracle <checkout>` recomputes them from a checkout
of MTME (see mtme_oracle.py: CI reaches no GitHub, and MTME is not on PyPI).
"""

from __future__ import annotations

import json
import math

import pytest

from bouquet_eval.results.agreement import MTME_STATISTICS
from bouquet_eval.results.correlations import Settings, correlations

from .mtme_oracle import FIXTURE, MISSING, MTME_COMMIT, digest, judgement_table

RECORDED = json.loads(FIXTURE.read_text(encoding="utf-8"))
REDERIVE = "python -m tests.mtme_oracle <checkout of MTME> --write"


def test_the_record_is_of_these_tables_at_the_pinned_commit() -> None:
    assert RECORDED["mtme_commit"] == MTME_COMMIT
    assert RECORDED["tables_sha256"] == digest(), f"the tables changed: rerun `{REDERIVE}`"
    assert list(RECORDED["statistics"]) == [f"missing-{int(m * 100)}" for m in MISSING]
    # Every statistic named after MTME is recorded, for every scope and metric.
    recorded = {
        tuple(values)
        for scopes in RECORDED["statistics"].values()
        for metrics in scopes.values()
        for values in metrics.values()
    }
    assert recorded == {MTME_STATISTICS}


@pytest.mark.parametrize("missing", MISSING)
def test_correlations_csv_equals_mtme(missing: float) -> None:
    table, scores = judgement_table(missing)
    # The intervals and tests are not MTME's: as few resamples and trials as will run.
    frame = correlations(table, scores, Settings(bootstrap_resamples=2, permutation_trials=2))
    expected = RECORDED["statistics"][f"missing-{int(missing * 100)}"]
    assert len(frame) == sum(len(metrics) for metrics in expected.values())
    compared = 0
    for row in frame.itertuples():
        recorded = expected[row.name][row.metric]
        for statistic in MTME_STATISTICS:
            value, mtme = getattr(row, statistic), recorded[statistic]
            where = f"{row.name} {row.metric} {statistic}: {value} vs MTME's {mtme}"
            if mtme is None:
                assert math.isnan(value), where
            else:
                assert abs(value - mtme) <= 1e-9, where
                compared += 1
    # The complete table defines each of them everywhere but one direction's system Pearson.
    assert compared >= len(frame) * (len(MTME_STATISTICS) - 1)
