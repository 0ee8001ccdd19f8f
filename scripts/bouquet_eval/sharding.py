"""Deterministic assignment of directions to jobs.

A direction's shard depends only on its own name and the number of shards, never on which
other directions are selected, so narrowing or widening a selection keeps every finished
direction in the job that produced it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from bouquet_eval.data import Direction

PER_DIRECTION = "per-direction"


def shard_index(direction: Direction, count: int) -> int:
    return zlib.crc32(direction.name.encode()) % count


def assign_shards(directions: Iterable[Direction], shards: int | str) -> dict[str, list[Direction]]:
    """Shard name -> its directions (sorted); empty shards are left out."""
    directions = sorted(directions)
    if shards == PER_DIRECTION:
        return {direction.name: [direction] for direction in directions}
    if not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards must be a positive integer or '{PER_DIRECTION}', not {shards!r}")
    by_index: dict[int, list[Direction]] = {}
    for direction in directions:
        by_index.setdefault(shard_index(direction, shards), []).append(direction)
    return {f"shard{index}of{shards}": by_index[index] for index in sorted(by_index)}
