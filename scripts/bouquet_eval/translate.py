"""Translating directions: resumable per direction, with the translator loaded at most once."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.config import expand_path
from bouquet_eval.data import DatasetSource, Direction
from bouquet_eval.environment import hub_model, job_environment
from bouquet_eval.io import write_json, write_jsonl
from bouquet_eval.outputs import translation_output
from bouquet_eval.prompt import PROMPT_TEMPLATE, PromptFn
from bouquet_eval.translators import RowTranslator, Translator, load_prompt_fn, load_translator
from bouquet_eval.translators.backends import (
    BACKENDS,
    model_gpus,
    prompt_fn_spec,
    translator_arguments,
)
from bouquet_eval.translators.provided import provided_file
from bouquet_eval.translators.reasoning import strip_reasoning

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

TIMING_DIR = ".timing"
"""Per-direction timing records beside the translations (see `timing_record`)."""


def model_settings(model: dict[str, Any]) -> dict[str, Any]:
    """What in a model entry decides its translations, with real values (never write it out
    without `provenance.redact`).

    Settings that only change speed (a backend's `operational` ones) are left out, so that
    raising an API's concurrency, say, does not make finished translations stale.
    """
    backend = BACKENDS.get(model["translator"])
    arguments = translator_arguments(model)
    for key in backend.operational if backend else ():
        arguments.pop(key, None)
    prompt_fn = prompt_fn_spec(model)
    takes_prompts = backend is None or backend.takes_prompts
    return {
        "translator": model["translator"],
        "settings": arguments,
        "prompt_fn": prompt_fn if takes_prompts else None,
        "prompt_kwargs": model.get("prompt_kwargs") if takes_prompts else None,
        # The template is recorded verbatim, so that editing it invalidates translations.
        "prompt_template": PROMPT_TEMPLATE if takes_prompts and prompt_fn is None else None,
    }


def translation_settings(model: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """What decides a model's translation of a direction, besides the direction's sentences."""
    return {"model": model_settings(model), "limit": limit}


def provided_folder(model: dict[str, Any]) -> Path | None:
    """Where a model's translations brought from elsewhere are (None for other translators)."""
    return expand_path(model["path"]) if model["translator"] == "provided" else None


def translate_model(
    model: dict[str, Any],
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    limit: int | None = None,
    secrets: frozenset[str] = frozenset(),
) -> None:
    """Translate `directions` with a model entry of the workflow configuration."""
    backend = BACKENDS.get(model["translator"])

    def make_translator() -> tuple[Translator | RowTranslator, PromptFn]:
        arguments = translator_arguments(model)
        if backend is not None and backend.request_cache:
            # Every answer is kept as it arrives, so that no paid request is ever sent twice.
            arguments["cache_dir"] = str(output_dir / ".cache" / "requests")
        if backend is not None and backend.takes_limit:
            arguments["limit"] = limit
        return (
            load_translator(model["translator"], arguments),
            load_prompt_fn(prompt_fn_spec(model), model.get("prompt_kwargs")),
        )

    def describe_environment() -> dict[str, Any]:
        environment = job_environment(uses_gpu=model_gpus(model) > 0)
        if backend is not None and backend.hub_model:
            environment["model"] = hub_model(model["model"], model.get("revision"))
        return environment

    folder = provided_folder(model)
    translate_directions(
        directions,
        dataset,
        output_dir,
        make_translator,
        translation_settings(model, limit),
        limit,
        None if folder is None else partial(provided_file, folder),
        secrets,
        describe_environment,
    )


def translate_directions(
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    make_translator: Callable[[], tuple[Translator | RowTranslator, PromptFn]],
    settings: dict[str, Any],
    limit: int | None = None,
    provided: Callable[[Direction], Path] | None = None,
    secrets: frozenset[str] = frozenset(),
    describe_environment: Callable[[], dict[str, Any]] = lambda: job_environment(False),
) -> None:
    """Write `<output_dir>/<src>-<tgt>.jsonl` for every direction that is not current.

    `make_translator` is called only when some direction needs translating, so a rerun that
    finds everything done loads no model. `settings` (real values) decide the translations
    with the direction's dataset file; `provided`, when given, names a file of translations
    made elsewhere that each direction is made from too. A translator with
    `check_directions(directions)` is asked first, before it loads a model, whether it supports
    them all. `describe_environment()`, called once the translator is ready, says what the job
    runs with, for the manifest.
    """
    translator: Translator | RowTranslator | None = None
    prompt_fn: PromptFn | None = None
    environment: dict[str, Any] = {}
    total = len(directions)
    for position, direction in enumerate(directions, start=1):
        output = translation_output(
            output_dir,
            direction,
            settings,
            dataset.file(direction),
            None if provided is None else provided(direction),
            secrets,
        )
        output.remove_stray_temporaries()
        progress = f"[{position}/{total}] {direction}"
        if output.is_current():
            log.info("%s: up to date", progress)
            continue
        if output.restore_from_cache():
            log.info("%s: restored from %s", progress, output.cached)
            continue
        rows = dataset.load(direction, limit)
        if translator is None or prompt_fn is None:
            translator, prompt_fn = _start(make_translator, directions)
            environment = describe_environment()
        started, before = time.monotonic(), usage_counters(translator)
        raw = translate_rows(translator, prompt_fn, rows, direction)
        frame = translation_frame(rows, raw)
        output.publish(partial(write_jsonl, frame=frame), environment)
        record = timing_record(direction, len(rows), time.monotonic() - started, before, translator)
        write_json(output_dir / TIMING_DIR / f"{direction}.json", record)
        log.info(
            "%s: %d sentences in %.2f s (%.1f sentences/s)",
            progress,
            len(rows),
            record["seconds"],
            record["sentences_per_second"],
        )


def _start(
    make_translator: Callable[[], tuple[Translator | RowTranslator, PromptFn]],
    directions: Sequence[Direction],
) -> tuple[Translator | RowTranslator, PromptFn]:
    started = time.monotonic()
    translator, prompt_fn = make_translator()
    check = getattr(translator, "check_directions", None)
    if check is not None:
        check(directions)
    log.info("translator ready in %.1f s", time.monotonic() - started)
    return translator, prompt_fn


def usage_counters(translator: Any) -> dict[str, float]:
    """A translator's cumulative counters (requests, tokens, ...), where it keeps any."""
    usage = getattr(translator, "usage", None) or getattr(translator, "stats", None)
    if dataclasses.is_dataclass(usage) and not isinstance(usage, type):
        usage = dataclasses.asdict(usage)
    if not isinstance(usage, dict):
        return {}
    return {key: value for key, value in usage.items() if isinstance(value, (int, float))}


def timing_record(
    direction: Direction, sentences: int, seconds: float, before: dict[str, float], translator: Any
) -> dict[str, Any]:
    """Wall time of one direction, with what the translator counted meanwhile."""
    counted = {key: value - before.get(key, 0) for key, value in usage_counters(translator).items()}
    record: dict[str, Any] = {
        "src_lang": direction.src_lang,
        "tgt_lang": direction.tgt_lang,
        "sentences": sentences,
        "seconds": round(seconds, 3),
        "sentences_per_second": round(sentences / seconds, 3) if seconds > 0 else None,
        **counted,
    }
    generated = counted.get("completion_tokens") or counted.get("generated_tokens")
    if generated and seconds > 0:
        record["output_tokens_per_second"] = round(generated / seconds, 3)
    return record


def translate_rows(
    translator: Translator | RowTranslator,
    prompt_fn: PromptFn,
    rows: pd.DataFrame,
    direction: Direction,
) -> list[str]:
    if isinstance(translator, RowTranslator):
        translations = translator.translate_rows(rows)
    else:
        prompts = [
            prompt_fn(direction.src_lang, direction.tgt_lang, text) for text in rows["src_text"]
        ]
        try:
            translations = translator.translate(prompts)
        except Exception as error:
            raise RuntimeError(f"direction {direction}: {error}") from error
    translations = list(translations)
    if len(translations) != len(rows):
        raise ValueError(
            f"direction {direction}: the translator returned {len(translations)} outputs "
            f"for {len(rows)} sentences"
        )
    not_text = [i for i, text in enumerate(translations) if not isinstance(text, str)]
    if not_text:
        raise TypeError(
            f"direction {direction}: output {not_text[0]} of the translator is a "
            f"{type(translations[not_text[0]]).__name__}, not a str"
        )
    return translations


def translation_frame(rows: pd.DataFrame, raw: list[str]) -> pd.DataFrame:
    """The JSONL rows. Reasoning a model printed before its answer is not scored: mt_text
    holds the answer alone, and mt_raw the whole output when the two differ anywhere."""
    import pandas as pd

    translations = [strip_reasoning(text) for text in raw]
    frame = pd.DataFrame(
        {
            "src_lang": rows["src_lang"],
            "tgt_lang": rows["tgt_lang"],
            "src_text": rows["src_text"],
            "ref_text": rows["tgt_text"],
            "mt_text": translations,
            "uniq_id": rows["uniq_id"],
        }
    )
    if translations != raw:
        frame["mt_raw"] = raw
    return frame
