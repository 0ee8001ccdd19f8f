"""How far a run has got: per model and stage, the directions done out of those selected.

Read from the outputs and their provenance records only, never from Snakemake's state, so that
it can be asked while a run is writing them (`snakemake progress --nolock`). A direction is
translated, or scored, when its output is current by the very test the planner and the jobs
apply (bouquet_eval.outputs), and scored only when its translations are translated too;
translations brought in place in the model's folder count as translated when their file is
there. A change of metric versions alone is not seen here; the
score job sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bouquet_eval.data import DatasetSource, Direction
from bouquet_eval.outputs import score_settings, scored_output, translation_output
from bouquet_eval.translate import provided_folder, translation_settings


@dataclass(frozen=True)
class StageProgress:
    model: str
    stage: str
    done: int
    total: int


def run_progress(
    config: Mapping[str, Any],
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    secrets: frozenset[str] = frozenset(),
) -> list[StageProgress]:
    """Translate and score progress of each model of the configuration over `directions`."""
    scoring = score_settings(config["metrics"], config)
    progress = []
    for model in config["models"]:
        model_dir = output_dir / model["name"]
        settings = translation_settings(model, config["limit"])
        folder = provided_folder(model)
        in_place = folder is not None and folder.resolve() == model_dir.resolve()
        translated = scored = 0
        for direction in directions:
            dataset_file = dataset.file(direction)
            translation = translation_output(
                model_dir,
                direction,
                settings,
                dataset_file,
                None if folder is None else folder / f"{direction}.jsonl",
                secrets,
            )
            done = translation.path.is_file() if in_place else translation.is_current()
            translated += done
            # Scores of translations about to be redone are not done, current as they may be.
            score = scored_output(model_dir, direction, scoring, dataset_file, secrets)
            scored += done and score.is_current()
        progress.append(StageProgress(model["name"], "translate", translated, len(directions)))
        progress.append(StageProgress(model["name"], "score", scored, len(directions)))
    return progress


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
