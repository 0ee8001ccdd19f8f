"""Translators: what turns source sentences into translations.

Two protocols, both runtime-checkable so that no subclassing is needed:
- `Translator.translate(prompts)`: the usual case; prompts come from the prompt function.
- `RowTranslator.translate_rows(rows)`: sees the whole direction (sources and references);
  used by the built-in bounds `copy-source` and `reference`.

A `Translator` may also be a `BatchTranslator`: `translate_batches` takes the prompts of many
directions at once, so that work on the next direction starts while the last outputs of the
previous one are still being produced. The runner uses it when it is there. Two more optional
methods are looked for: `check_directions(directions)`, called first, which raises for
directions the model cannot translate; and `load()`, called next, which loads the model so
that its load is timed apart from the first direction's translation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from bouquet_eval.core.config import import_object

# The registry of built-in translators and what follows from a model entry, re-exported as
# part of this package's interface.
from bouquet_eval.translators.backends import (
    BACKENDS,
    model_gpus,
    prompt_fn_spec,
    translator_arguments,
)
from bouquet_eval.translators.prompt import PromptFn, build_prompt

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BACKENDS",
    "BatchError",
    "BatchTranslator",
    "RowTranslator",
    "Translator",
    "load_prompt_fn",
    "load_translator",
    "model_gpus",
    "prompt_fn_spec",
    "translator_arguments",
]


@runtime_checkable
class Translator(Protocol):
    def translate(self, prompts: list[str]) -> list[str]: ...


@runtime_checkable
class RowTranslator(Protocol):
    def translate_rows(self, rows: pd.DataFrame) -> list[str]: ...


@runtime_checkable
class BatchTranslator(Protocol):
    def translate_batches(self, batches: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
        """Translate many batches of prompts (one per direction) as one stream of work.

        Batches are taken from `batches` only as room for more work appears, so that the
        caller prepares them no sooner than needed. Each batch is yielded back as
        `(position in batches, its translations)` as soon as its last translation is done,
        in whatever order batches finish; each is yielded once. A failure that belongs to one
        batch is raised as a `BatchError` naming it.
        """
        ...


class BatchError(RuntimeError):
    """A failure of the batch at `index` of a `translate_batches` stream."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(detail)
        self.index = index


def load_translator(spec: str, kwargs: dict[str, Any]) -> Translator | RowTranslator:
    """Build the translator named by `spec` (built-in name or "pkg.module:Name") with `kwargs`."""
    backend = BACKENDS.get(spec)
    factory = import_object(backend.factory if backend else spec)
    translator = factory(**kwargs)
    if not isinstance(translator, (Translator, RowTranslator)):
        raise TypeError(
            f"translator '{spec}' built a {type(translator).__name__}, which has no "
            "translate(prompts: list[str]) -> list[str] method"
        )
    return translator


def load_prompt_fn(spec: str | None, kwargs: Mapping[str, Any] | None) -> PromptFn:
    """The default template, a named prompt function, or the result of a named factory."""
    if spec is None:
        return build_prompt
    target: Callable[..., Any] = import_object(spec)
    prompt_fn = target(**kwargs) if kwargs is not None else target
    if not callable(prompt_fn):
        raise TypeError(f"prompt_fn '{spec}' did not give a callable")
    return prompt_fn
