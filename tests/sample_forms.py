"""The bundled sample in the other forms the workflow takes it: saved by `datasets`'
save_to_disk, and translated by three systems whose translations people judged (Met-BOUQuET's
assumed layout, docs/metaeval.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .conftest import SAMPLE

DEFAULT_COLUMNS = {
    "src_lang": "src_lang",
    "tgt_lang": "tgt_lang",
    "source": "src_text",
    "translation": "mt_text",
    "reference": "tgt_text",
    "system": "system",
    "score": "score",
    "segment": "uniq_id",
}
"""metaeval.columns by default: each field's column in Met-BOUQuET's assumed layout."""


def save_sample(folder: Path, as_dict: bool = False) -> None:
    """The sample's rows in one table, directions interleaved, as `datasets` saves it (needs
    `datasets`, of the main environment)."""
    import datasets

    tables = [pq.read_table(path) for path in sorted(SAMPLE.glob("*.parquet"))]
    table = pa.concat_tables(tables, promote_options="default")
    # Directions interleaved, one row of each in turn: the layout must keep each one's order.
    starts = [sum(t.num_rows for t in tables[:i]) for i in range(len(tables))]
    longest = max(t.num_rows for t in tables)
    order = [
        start + row
        for row in range(longest)
        for start, t in zip(starts, tables, strict=True)
        if row < t.num_rows
    ]
    saved = datasets.Dataset(table.take(order))
    (datasets.DatasetDict({"test": saved, "dev": saved}) if as_dict else saved).save_to_disk(
        str(folder)
    )


def sample_judgements() -> pd.DataFrame:
    """Three systems' translations of the sample's sentences in two of its directions."""
    rows = []
    for name in ("eng_Latn-fra_Latn", "deu_Latn-eng_Latn"):
        sentences = pd.read_parquet(SAMPLE / f"{name}.parquet")
        for position, sentence in enumerate(sentences.itertuples()):
            words = sentence.tgt_text.split()
            for quality, system in enumerate(("good", "fair", "poor")):
                kept = words[: max(1, len(words) - quality * (1 + position % 3))]
                rows.append(
                    {
                        "src_lang": sentence.src_lang,
                        "tgt_lang": sentence.tgt_lang,
                        "src_text": sentence.src_text,
                        "mt_text": " ".join(kept),
                        "tgt_text": sentence.tgt_text,
                        "system": system,
                        "score": 5 - quality - (position % 2),
                        "uniq_id": sentence.uniq_id,
                    }
                )
    return pd.DataFrame(rows)


def judgements_by(systems: Sequence[str]) -> pd.DataFrame:
    """`sample_judgements`, each of `systems` a system of its own: the sample's three systems'
    rows taken in turn, each renamed."""
    table = sample_judgements()
    names = sorted(table["system"].unique())
    return pd.concat(
        [
            table[table["system"] == names[position % len(names)]].assign(system=system)
            for position, system in enumerate(systems)
        ],
        ignore_index=True,
    )
