"""How far a run has got: per model and stage, the directions done out of those selected.

Read from the outputs and their provenance records only, never from Snakemake's state, so that
it can be asked while a run is writing them (`snakemake progress --nolock`):
- a direction is translated when its translations file is current, by the test its translate
  job applies (the model's settings, the limit, the direction's sentences);
- it is scored when it is translated and its scores file was computed from that very file (the
  translations' sha256 recorded with the scores) and is whole. A change of metric versions
  alone is not seen here; the score job sees it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.data import DatasetSource, Direction
from bouquet_eval.io import file_sha256
from bouquet_eval.provenance import ResumableOutput
from bouquet_eval.translate import model_fingerprint, model_settings, translation_output

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class StageProgress:
    model: str
    stage: str
    done: int
    total: int


def run_progress(
    models: Sequence[dict[str, Any]],
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    limit: int | None,
) -> list[StageProgress]:
    """Translate and score progress of each model over `directions`."""
    # Each direction's sentences are read once, whatever the number of models.
    sentences: dict[Direction, pd.DataFrame] = {}
    progress = []
    for model in models:
        model_dir = output_dir / model["name"]
        settings, fingerprint = model_settings(model), model_fingerprint(model)
        translated = scored = 0
        for direction in directions:
            if direction not in sentences:
                sentences[direction] = dataset.load(direction, limit)
            output = translation_output(
                model_dir, direction, sentences[direction], settings, limit, fingerprint
            )
            if output.is_current():
                translated += 1
                scored += scored_from(model_dir / f"{direction}.scored.parquet", output.path)
        progress.append(StageProgress(model["name"], "translate", translated, len(directions)))
        progress.append(StageProgress(model["name"], "score", scored, len(directions)))
    return progress


def scored_from(scores: Path, translations: Path) -> bool:
    """Whether `scores` is whole and was computed from `translations` as they are now."""
    sidecar = ResumableOutput(scores, {}).sidecar
    if not (scores.is_file() and sidecar.is_file()):
        return False
    try:
        record = json.loads(sidecar.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return False
    # bouquet_eval.score records the sha256 of the translations it scored in its settings.
    scored = record.get("settings", {}).get("translations_sha256")
    whole = record.get("sha256") == file_sha256(scores)
    return whole and scored == file_sha256(translations)


def progress_table(progress: Sequence[StageProgress]) -> str:
    """One line per model and stage: directions done, of how many, and the share."""
    width = max([len("model"), *(len(row.model) for row in progress)])
    lines = [f"{'model':<{width}}  {'stage':<9}  {'done':>6}  {'of':>6}"]
    for row in progress:
        share = row.done / row.total if row.total else 1.0
        lines.append(
            f"{row.model:<{width}}  {row.stage:<9}  {row.done:>6}  {row.total:>6}  {share:>5.0%}"
        )
    return "\n".join(lines)
