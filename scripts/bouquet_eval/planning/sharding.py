"""Deterministic assignment of directions to jobs.

A direction's shard depends only on its own name and the number of shards, never on which
other directions are selected, so narrowing or widening a selection keeps every finished
direction in the job that produced it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from bouquet_eval.core.config import ConfigError
from bouquet_eval.data.dataset import Direction

PER_DIRECTION = "per-direction"
AUTO = "auto"
"""As many jobs per model as a local run's cores (and GPUs) hold at once (`fitting_shards`);
`AUTO_ELSEWHERE` where the run has no cores of its own to fit (a cluster, a report)."""
AUTO_ELSEWHERE = 4


def shard_index(direction: Direction, count: int) -> int:
    return zlib.crc32(direction.name.encode()) % count


def parse_part(part: str) -> tuple[int, int]:
    """`I/N` (a part of the selection, `directions.shard`) -> (I, N)."""
    index, _, count = (int(number) if number.isdigit() else -1 for number in part.partition("/"))
    if not 0 <= index < count:
        raise ConfigError(f"directions.shard '{part}': expected I/N with 0 <= I < N, as 0/8")
    return index, count


def take_part(directions: Iterable[Direction], part: str | None) -> list[Direction]:
    """The directions `[I::N]` of the sorted selection (all of them when `part` is None).

    Processes started with parts 0/N .. N-1/N of one selection own disjoint sets of directions
    and, between them, all of it.
    """
    directions = sorted(directions)
    if part is None:
        return directions
    index, count = parse_part(part)
    return directions[index::count]


def assign_shards(
    directions: Iterable[Direction], shards: int | str, part: str | None = None
) -> dict[str, list[Direction]]:
    """Shard name -> its directions (sorted); empty shards are left out.

    In a part of the selection, shard names start with the part's, so that the jobs of
    concurrent parts have names, logs and stamps of their own.
    """
    prefix = "part{}of{}_".format(*parse_part(part)) if part else ""
    return {f"{prefix}{name}": chosen for name, chosen in _shards(directions, shards).items()}


def fitting_shards(cores: int, gpus: int | None, jobs: Iterable[tuple[int, int]]) -> int:
    """How many of a model's jobs a local run of `cores` CPU cores (and `gpus` GPUs, where
    Snakemake is told of them: `--resources gpu=N`) runs at once, each of its jobs (`jobs`:
    its translate job and its score jobs, as (CPUs, GPUs)) in as many shards: so that none of
    its jobs waits for a core behind another of its own. Jobs that need GPUs the run does not
    count are in `AUTO_ELSEWHERE` shards at most: each would load its model anew on a device
    that another may hold."""
    fitting = [AUTO_ELSEWHERE] if any(g for _, g in jobs) and gpus is None else []
    for cpus, job_gpus in jobs:
        fitting.append(cores // max(cpus, 1))
        if job_gpus and gpus is not None:
            fitting.append(gpus // job_gpus)
    return max(1, min(fitting, default=1))


def _shards(directions: Iterable[Direction], shards: int | str) -> dict[str, list[Direction]]:
    directions = sorted(directions)
    if shards == AUTO:
        shards = AUTO_ELSEWHERE
    if shards == PER_DIRECTION:
        return {direction.name: [direction] for direction in directions}
    if not isinstance(shards, int) or shards < 1:
        raise ValueError(
            f"shards must be a positive integer, '{PER_DIRECTION}' or '{AUTO}', not {shards!r}"
        )
    by_index: dict[int, list[Direction]] = {}
    for direction in directions:
        by_index.setdefault(shard_index(direction, shards), []).append(direction)
    return {f"shard{index}of{shards}": by_index[index] for index in sorted(by_index)}
