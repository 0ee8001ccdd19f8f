"""Translating from one's own script, with the workflow's atomic, resumable outputs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bouquet_eval.data import DatasetSource, Direction, resolve_dataset
from bouquet_eval.prompt import PROMPT_TEMPLATE, PromptFn, build_prompt
from bouquet_eval.translate import translate_directions
from bouquet_eval.translators import RowTranslator, Translator

DEFAULT_DATASET = {
    "name": "facebook/bouquet",
    "config": "benchmark_sentence_level",
    "split": "test",
    "revision": "main",
    "path": None,
}


def run_translation(
    translator: Translator | RowTranslator,
    directions: Iterable[Direction | str],
    output_dir: str | Path,
    prompt_fn: PromptFn = build_prompt,
    dataset: DatasetSource | dict[str, Any] | str | Path | None = None,
    limit: int | None = None,
) -> None:
    """Write `<output_dir>/<src>-<tgt>.jsonl` for each direction, as the workflow does.

    `dataset` is a resolved source, a `dataset` section of the workflow configuration, a local
    folder of `<src>-<tgt>.parquet` files, or None for BOUQuET on the hub. Directions already
    translated with the same translator, prompt function and sentences are skipped. The
    folder can then be scored by the workflow with `translator: provided`.
    """
    if not isinstance(translator, (Translator, RowTranslator)):
        raise TypeError(f"{type(translator).__name__} has no translate(prompts) method")
    source = _dataset(dataset)
    chosen = [d if isinstance(d, Direction) else Direction.parse(d) for d in directions]
    settings = {
        "translator": _name(type(translator)),
        "prompt_fn": _name(prompt_fn),
        "prompt_template": PROMPT_TEMPLATE if prompt_fn is build_prompt else None,
    }
    translate_directions(
        chosen, source, Path(output_dir), lambda: (translator, prompt_fn), settings, limit
    )


def _dataset(dataset: DatasetSource | dict[str, Any] | str | Path | None) -> DatasetSource:
    if isinstance(dataset, DatasetSource):
        return dataset
    if dataset is None:
        return resolve_dataset(DEFAULT_DATASET)
    if isinstance(dataset, dict):
        return resolve_dataset({**DEFAULT_DATASET, **dataset})
    return resolve_dataset({**DEFAULT_DATASET, "path": str(dataset)})


def _name(thing: Any) -> str:
    return f"{getattr(thing, '__module__', '?')}:{getattr(thing, '__qualname__', repr(thing))}"
