"""BOUQuET as the local Hub serves it to the dataset, prefetch, metaeval and parsing tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .hub_server import HubServer, Repository, files_of

SENTENCE_LEVEL = "benchmark_data/sentence_level"
MET_BOUQUET_FILES = ("met_bouquet/test/part-0.parquet", "met_bouquet/test/part-1.parquet")
"""Where `met_bouquet_on_hub` puts the judgements: one folder deeper than the assumed one."""


def bouquet_on_hub(hub: HubServer, dataset: Path) -> Repository:
    """A gated facebook/bouquet laid out as on the Hub, with the sample as its test split."""
    repository = hub.repository("facebook/bouquet", "dataset", gated=True)
    repository.commit(
        {
            **files_of(dataset, f"{SENTENCE_LEVEL}/test/"),
            f"{SENTENCE_LEVEL}/dev/eng_Latn-fra_Latn.parquet": b"not fetched for the test split",
            "README.md": b"---\nextra_gated_prompt: accept the conditions\n---\n",
        }
    )
    return repository


def met_bouquet_on_hub(repository: Repository, table: pd.DataFrame, folder: Path) -> str:
    """Commit `table` to `repository` as Met-BOUQuET's judgements, its rows split in two files
    (`MET_BOUQUET_FILES`, written first under `folder`); the commit."""
    half = len(table) // 2
    for name, part in zip(MET_BOUQUET_FILES, (table.iloc[:half], table.iloc[half:]), strict=True):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        part.to_parquet(folder / name)
    return repository.commit({name: (folder / name).read_bytes() for name in MET_BOUQUET_FILES})
