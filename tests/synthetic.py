"""Synthetic BOUQuET-shaped datasets of any size, for scale tests and benchmarks."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bouquet_eval.data import Direction


def synthetic_directions(count: int) -> list[Direction]:
    codes = [f"{a}{b}x_Latn" for a, b in itertools.product("abcdefgh", repeat=2)]
    pairs = itertools.permutations(codes, 2)
    return [Direction(s, t) for s, t in itertools.islice(pairs, count)]


def write_dataset(folder: Path, directions: list[Direction], sentences: int = 2) -> None:
    folder.mkdir(parents=True)
    for direction in directions:
        table = pa.table(
            {
                "src_lang": [direction.src_lang] * sentences,
                "tgt_lang": [direction.tgt_lang] * sentences,
                "src_text": [f"sentence number {i} of the source." for i in range(sentences)],
                "tgt_text": [f"the reference of sentence {i}." for i in range(sentences)],
                "uniq_id": [f"s{i}" for i in range(sentences)],
            }
        )
        pq.write_table(table, folder / f"{direction}.parquet")
