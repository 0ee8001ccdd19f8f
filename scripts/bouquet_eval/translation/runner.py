"""Translating from one's own script, with the workflow's atomic, resumable outputs."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bouquet_eval.data.dataset import DatasetSource, Direction, as_direction, dataset_source
from bouquet_eval.translation.translate import translate_directions
from bouquet_eval.translators import RowTranslator, Translator
from bouquet_eval.translators.prompt import PROMPT_TEMPLATE, PromptFn, build_prompt


def run_translation(
    translator: Translator | RowTranslator,
    directions: Iterable[Direction | str | Sequence[str]],
    output_dir: str | os.PathLike[str],
    prompt_fn: PromptFn = build_prompt,
    dataset: DatasetSource | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    limit: int | None = None,
) -> None:
    """Write `<output_dir>/<src>-<tgt>.jsonl` for each direction, as the workflow does.

    `directions` are `Direction`s, names such as `eng_Latn-fra_Latn` or pairs such as
    `("eng_Latn", "fra_Latn")`. `dataset` is a resolved source, a `dataset` section of the
    workflow configuration, a local folder of `<src>-<tgt>.parquet` files, or None for BOUQuET
    on the hub. Directions already translated with the same translator, prompt function and
    sentences are skipped. The folder can then be scored by the workflow with
    `translator: provided`.
    """
    if not isinstance(translator, (Translator, RowTranslator)):
        raise TypeError(f"{type(translator).__name__} has no translate(prompts) method")
    settings = {
        "translator": _name(type(translator)),
        "prompt_fn": _name(prompt_fn),
        "prompt_template": PROMPT_TEMPLATE if prompt_fn is build_prompt else None,
        "limit": limit,
    }
    translate_directions(
        [as_direction(direction) for direction in directions],
        dataset_source(dataset),
        Path(output_dir),
        lambda: (translator, prompt_fn),
        settings,
        limit,
    )


def _name(thing: Any) -> str:
    return f"{getattr(thing, '__module__', '?')}:{getattr(thing, '__qualname__', repr(thing))}"
