"""A dataset saved by `datasets` (save_to_disk) at BOUQuET's shape: what parsing, planning and
a job pay for it, laid out per direction or read from the saved table directly.

    .venv/bin/python benchmarks/saved_dataset.py [--directions 1062] [--sentences 854]

Saves a synthetic table of `--directions` x `--sentences` rows (directions interleaved, as a
table filtered or shuffled by `datasets` may hold them), then times, in this process:
- what the plan does while Snakemake parses the workflow: open the saved table and name its
  directions from its language columns, writing nothing (`resolve_dataset(prepare=False)`);
  and the same once the layout exists (its folder is listed);
- what the main process does once Snakemake plans the run, the first time: lay the table out
  as one parquet file per direction (`prepare_dataset`), and check every direction's file
  (`DatasetSource.check_files`, as planning does; later plans read only changed files);
- what a job pays to read one direction: from its file in the layout, against a filter of the
  saved table (what reading the arrow files directly, without a copy, would pay; checking
  every direction that way at planning would pay it once per direction).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPOSITORY / "scripts"), str(REPOSITORY)]

from bouquet_eval.data.dataset import prepare_dataset, resolve_dataset  # noqa: E402
from tests.synthetic import bouquet_shaped_directions  # noqa: E402


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def save(folder: Path, directions: int, sentences: int) -> int:
    """The synthetic table, saved; its number of rows."""
    import datasets
    import pyarrow as pa

    pairs = bouquet_shaped_directions()[:directions]
    rows = len(pairs) * sentences
    # Row i is sentence i // len(pairs) of direction i % len(pairs): directions interleaved.
    direction = [pairs[i % len(pairs)] for i in range(rows)]
    sentence = [i // len(pairs) for i in range(rows)]
    table = pa.table(
        {
            "src_lang": [d.src_lang for d in direction],
            "tgt_lang": [d.tgt_lang for d in direction],
            "src_text": [f"source sentence {n} of the benchmark." for n in sentence],
            "tgt_text": [f"the reference of sentence {n}." for n in sentence],
            "uniq_id": [f"s{n}" for n in sentence],
        }
    )
    datasets.Dataset(table).save_to_disk(str(folder), max_shard_size="2GB")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        saved = Path(scratch) / "saved"
        rows = save(saved, arguments.directions, arguments.sentences)
        size = sum(path.stat().st_size for path in saved.iterdir()) / 2**20
        print(f"saved table: {rows} rows, {size:.0f} MiB of arrow files")
        os.chdir(scratch)  # the layout goes under the working directory's .snakemake/
        settings = {"path": str(saved)}
        parse, planned = timed(lambda: resolve_dataset(settings, prepare=False))
        assert planned.listed is not None and not Path(".snakemake").exists()
        print(f"parse, nothing written: {parse:.2f} s ({len(planned.listed)} directions named)")
        layout, _ = timed(lambda: prepare_dataset(planned))
        print(f"planning, the first time: the layout written in {layout:.2f} s")
        directions = planned.directions()
        check, _ = timed(lambda: planned.check_files(directions))
        print(f"planning, the first time: every direction's file checked in {check:.2f} s")
        again, source = timed(lambda: resolve_dataset(settings, prepare=False))
        assert source.listed is None
        print(f"parse once laid out: {again:.2f} s")

        import datasets
        import pyarrow.compute as pc

        table = datasets.load_from_disk(str(saved)).data.table
        sample = directions[:: max(1, len(directions) // 20)]
        from_files, _ = timed(lambda: [source.load(d) for d in sample])
        filtered, _ = timed(
            lambda: [
                table.filter(
                    pc.and_(
                        pc.equal(table.column("src_lang"), d.src_lang),
                        pc.equal(table.column("tgt_lang"), d.tgt_lang),
                    )
                )
                for d in sample
            ]
        )
        each_file, each_filter = from_files / len(sample), filtered / len(sample)
        print(
            f"one direction, mean of {len(sample)}: {each_file * 1000:.1f} ms from its file "
            f"(read and checked), {each_filter * 1000:.1f} ms filtered out of the saved table "
            f"(not checked); {each_filter * len(directions):.1f} s to filter every direction"
        )


if __name__ == "__main__":
    main()
