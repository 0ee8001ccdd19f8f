"""What a run selected, said first: directions, sentences and models.

The workflow prints it as the first line of its own output, before Snakemake's plan, and
writes it to the file that $BOUQUET_EVAL_SELECTION_FILE names, if set (the `bouquet-eval`
command reads it there to count progress over the selected directions): once Snakemake plans
the run, never while it parses the workflow.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.parquet as pq

from bouquet_eval.core.io import write_json
from bouquet_eval.data.dataset import DatasetSource, Direction

SELECTION_FILE_VARIABLE = "BOUQUET_EVAL_SELECTION_FILE"


@dataclass(frozen=True)
class Selection:
    directions: list[str]
    """The directions this run handles (its part of the selection, with directions.shard)."""
    selected: int
    """Directions of the whole selection."""
    sentences: int
    """Sentences of the directions this run handles, per model (`limit` applied)."""
    models: list[str]
    part: str | None

    def line(self) -> str:
        count = len(self.directions)
        models = f"{len(self.models)} model{'s' * (len(self.models) != 1)}"
        directions = f"{count} direction{'s' * (count != 1)}"
        if self.part is not None:
            directions = f"shard {self.part}: {directions} of {self.selected}"
        sentences = f"{self.sentences:,} sentences per model"
        return f"bouquet-eval: {directions}, {models} selected ({sentences})"


def sentence_count(
    dataset: DatasetSource, directions: Sequence[Direction], limit: int | None
) -> int:
    """From the parquet files' footers, without reading their rows."""
    rows = (pq.read_metadata(dataset.file(direction)).num_rows for direction in directions)
    return sum(rows if limit is None else (min(count, limit) for count in rows))


def announce(
    dataset: DatasetSource,
    directions: Sequence[Direction],
    selected: int,
    models: Sequence[str],
    part: str | None,
    limit: int | None,
) -> Selection:
    selection = Selection(
        [direction.name for direction in directions],
        selected,
        sentence_count(dataset, directions, limit),
        list(models),
        part,
    )
    print(selection.line(), file=sys.stderr, flush=True)
    record = os.environ.get(SELECTION_FILE_VARIABLE)
    if record:
        write_json(Path(record), asdict(selection))
    return selection
