"""Translating directions: resumable per direction, with the translator loaded at most once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.data import DatasetSource, Direction, sentences_digest
from bouquet_eval.io import write_jsonl
from bouquet_eval.prompt import PROMPT_TEMPLATE, PromptFn
from bouquet_eval.provenance import ResumableOutput, redact
from bouquet_eval.translators import RowTranslator, Translator, load_prompt_fn, load_translator

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


def model_settings(model: dict[str, Any]) -> dict[str, Any]:
    """What in a model entry decides its translations, secrets redacted."""
    return redact(
        {
            "translator": model["translator"],
            "translator_kwargs": model.get("translator_kwargs", {}),
            "prompt_fn": model.get("prompt_fn"),
            "prompt_kwargs": model.get("prompt_kwargs"),
            # The template is recorded verbatim, so that editing it invalidates translations.
            "prompt_template": PROMPT_TEMPLATE if model.get("prompt_fn") is None else None,
        }
    )


def translate_model(
    model: dict[str, Any],
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    limit: int | None = None,
) -> None:
    """Translate `directions` with a model entry of the workflow configuration."""

    def make_translator() -> tuple[Translator | RowTranslator, PromptFn]:
        return (
            load_translator(model["translator"], model.get("translator_kwargs", {})),
            load_prompt_fn(model.get("prompt_fn"), model.get("prompt_kwargs")),
        )

    translate_directions(
        directions, dataset, output_dir, make_translator, model_settings(model), limit
    )


def translate_directions(
    directions: Sequence[Direction],
    dataset: DatasetSource,
    output_dir: Path,
    make_translator: Callable[[], tuple[Translator | RowTranslator, PromptFn]],
    settings: dict[str, Any],
    limit: int | None = None,
) -> None:
    """Write `<output_dir>/<src>-<tgt>.jsonl` for every direction that is not up to date.

    `make_translator` is called only when some direction needs translating, so a rerun that
    finds everything done loads no model. `settings` (redacted) identifies the translator.
    """
    translator: Translator | RowTranslator | None = None
    prompt_fn: PromptFn | None = None
    total = len(directions)
    for position, direction in enumerate(directions, start=1):
        rows = dataset.load(direction, limit)
        output = ResumableOutput(
            output_dir / f"{direction}.jsonl",
            {**settings, "limit": limit, "sentences": sentences_digest(rows)},
        )
        progress = f"[{position}/{total}] {direction}"
        if output.is_current():
            log.info("%s: up to date", progress)
            continue
        if output.restore_from_cache():
            log.info("%s: restored from %s", progress, output.cached)
            continue
        if translator is None or prompt_fn is None:
            started = time.monotonic()
            translator, prompt_fn = make_translator()
            log.info("loaded translator in %.1f s", time.monotonic() - started)
        started = time.monotonic()
        translations = translate_rows(translator, prompt_fn, rows, direction)
        output.publish(partial(write_jsonl, frame=translation_frame(rows, translations)))
        elapsed = time.monotonic() - started
        log.info(
            "%s: %d sentences in %.2f s (%.1f sentences/s)",
            progress,
            len(rows),
            elapsed,
            len(rows) / elapsed if elapsed > 0 else float("inf"),
        )


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
        translations = translator.translate(prompts)
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


def translation_frame(rows: pd.DataFrame, translations: list[str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(
        {
            "src_lang": rows["src_lang"],
            "tgt_lang": rows["tgt_lang"],
            "src_text": rows["src_text"],
            "ref_text": rows["tgt_text"],
            "mt_text": translations,
            "uniq_id": rows["uniq_id"],
        }
    )
