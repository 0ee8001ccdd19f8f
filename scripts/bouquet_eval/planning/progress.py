"""How far a run has got: per model and stage, the directions done out of those selected.

Read from the outputs and their provenance records only, never from Snakemake's state, so that
it can be asked while a run is writing them (`snakemake progress --nolock`). A direction is
translated, or scored, when its output is current by the very test the planner and the jobs
apply (bouquet_eval.core.freshness, on the plan's outputs), and scored only when its translations
are translated too; translations brought in place in the model's folder count as translated
when their file is there. A change of metric versions alone is not seen here; the score job
sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bouquet_eval.planning.plan import Plan


@dataclass(frozen=True)
class StageProgress:
    model: str
    stage: str
    done: int
    total: int


def run_progress(plan: Plan) -> list[StageProgress]:
    """Translate and score progress of each model of the plan over its directions."""
    progress = []
    total = len(plan.directions)
    for model in plan.models.values():
        translations = plan.translation_outputs(model, plan.directions)
        scores = plan.scored_outputs(model, plan.directions)
        translated = scored = 0
        for translation, score in zip(translations, scores, strict=True):
            in_place = model.translated_in_place
            done = translation.path.is_file() if in_place else translation.is_current()
            translated += done
            # Scores of translations about to be redone are not done, current as they may be.
            scored += done and score.is_current()
        progress.append(StageProgress(model.name, "translate", translated, total))
        progress.append(StageProgress(model.name, "score", scored, total))
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
