"""Directions assigned to jobs (bouquet_eval.planning.sharding)."""

from __future__ import annotations

import pytest

from bouquet_eval.data.dataset import Direction
from bouquet_eval.planning.sharding import (
    AUTO_ELSEWHERE,
    assign_shards,
    fitting_shards,
    shard_index,
)


def test_shards_are_stable_and_independent_of_the_selection() -> None:
    names = [f"eng_Latn-{code}_Latn" for code in ("fra", "deu", "spa", "ita", "nld", "pol")]
    everything = [Direction.parse(name) for name in names]
    full = assign_shards(everything, 3)
    partial = assign_shards(everything[:2], 3)
    for shard, members in partial.items():
        assert set(members) <= set(full[shard])
    assert sorted(d for members in full.values() for d in members) == sorted(everything)
    # crc32 is fixed by its definition, so the assignment never changes between runs.
    assert shard_index(Direction.parse("eng_Latn-fra_Latn"), 8) == 0xF47A2614 % 8 == 4
    assert assign_shards(everything, "per-direction") == {d.name: [d] for d in sorted(everything)}
    with pytest.raises(ValueError):
        assign_shards(everything, 0)


def test_auto_shards_fit_the_cores_and_gpus_of_a_run() -> None:
    """As many of a model's jobs as run at once: its translate and score jobs as (CPUs, GPUs)."""
    assert fitting_shards(2, None, [(1, 0), (1, 0)]) == 2
    assert fitting_shards(16, None, [(4, 0), (1, 0)]) == 4
    assert fitting_shards(2, None, [(4, 0)]) == 1  # Snakemake scales the job down to 2 cores
    assert fitting_shards(64, 8, [(4, 1), (2, 1)]) == 8
    assert fitting_shards(64, 8, [(4, 2), (1, 0)]) == 4
    # GPUs Snakemake is not told of: never more jobs than `shards` used to give.
    assert fitting_shards(64, None, [(4, 1), (1, 0)]) == AUTO_ELSEWHERE
    assert fitting_shards(2, None, [(4, 1)]) == 1
    # Where a run has no cores to fit (a cluster, a report), `auto` is that many shards.
    everything = [Direction.parse(f"eng_Latn-{code}_Latn") for code in ("fra", "deu", "spa")]
    assert assign_shards(everything, "auto") == assign_shards(everything, AUTO_ELSEWHERE)
