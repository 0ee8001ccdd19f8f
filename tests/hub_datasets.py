"""BOUQuET as the local Hub serves it to the dataset and prefetch tests."""

from __future__ import annotations

from pathlib import Path

from .hub_server import HubServer, Repository, files_of

SENTENCE_LEVEL = "benchmark_data/sentence_level"


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
