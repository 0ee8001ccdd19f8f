"""Write the bundled sample as BOUQuET-shaped parquet files, one per direction.

python data/sample/build.py            # rewrites data/sample/parquet/
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

HERE = Path(__file__).resolve().parent


def direction_table(sentences: list[dict], src_lang: str, tgt_lang: str) -> pa.Table:
    return pa.table(
        {
            "src_lang": [src_lang] * len(sentences),
            "tgt_lang": [tgt_lang] * len(sentences),
            "src_text": [s["texts"][src_lang] for s in sentences],
            "tgt_text": [s["texts"][tgt_lang] for s in sentences],
            "uniq_id": [f"sample-{index:03d}" for index in range(1, len(sentences) + 1)],
            "domain": [s["domain"] for s in sentences],
            "level": ["sentence_level"] * len(sentences),
            "split": ["test"] * len(sentences),
        }
    )


def build(source: Path, target: Path) -> list[Path]:
    sample = yaml.safe_load(source.read_text(encoding="utf-8"))
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for src_lang, tgt_lang in sample["directions"]:
        path = target / f"{src_lang}-{tgt_lang}.parquet"
        pq.write_table(direction_table(sample["sentences"], src_lang, tgt_lang), path)
        written.append(path)
    return written


if __name__ == "__main__":
    paths = build(HERE / "sentences.yaml", HERE / "parquet")
    print(f"wrote {len(paths)} files to {HERE / 'parquet'}", file=sys.stderr)
