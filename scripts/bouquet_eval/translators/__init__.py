"""Translators: what turns source sentences into translations.

Two protocols, both runtime-checkable so that no subclassing is needed:
- `Translator.translate(prompts)`: the usual case; prompts come from the prompt function.
- `RowTranslator.translate_rows(rows)`: sees the whole direction (sources and references);
  used by the built-in bounds `copy-source` and `reference`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from bouquet_eval.prompt import PromptFn, build_prompt

if TYPE_CHECKING:
    import pandas as pd


@runtime_checkable
class Translator(Protocol):
    def translate(self, prompts: list[str]) -> list[str]: ...


@runtime_checkable
class RowTranslator(Protocol):
    def translate_rows(self, rows: pd.DataFrame) -> list[str]: ...


@dataclass(frozen=True)
class Backend:
    """A built-in translator whose settings sit in the model entry beside its name."""

    factory: str
    prompt_fn: str | None = None
    """The prompt function it needs unless the entry names one (None: the default template)."""
    operational: tuple[str, ...] = ()
    """Settings that change how fast translations come, not what they are."""
    gpus_setting: str | None = None
    """The setting that says how many GPUs a job needs; None: a fixed `default_gpus`."""
    default_gpus: int = 0

    def gpus(self, settings: dict[str, Any]) -> int:
        if self.gpus_setting is not None:
            return int(settings.get(self.gpus_setting, 1))
        if settings.get("device") == "cpu":
            return 0
        return self.default_gpus


_SEQ2SEQ = "bouquet_eval.translators.hf_seq2seq"
BACKENDS = {
    "copy-source": Backend("bouquet_eval.translators.bounds:CopySource"),
    "reference": Backend("bouquet_eval.translators.bounds:Reference"),
    "provided": Backend("bouquet_eval.translators.provided:ProvidedTranslations"),
    "openai": Backend(
        "bouquet_eval.translators.openai_chat:OpenAIChatTranslator",
        operational=("api_key_env", "concurrency", "timeout", "max_retries"),
    ),
    "vllm": Backend(
        "bouquet_eval.translators.vllm_offline:VLLMTranslator",
        operational=("gpu_memory_utilization",),
        gpus_setting="tensor_parallel_size",
    ),
    "nllb": Backend(
        f"{_SEQ2SEQ}:NLLBTranslator", f"{_SEQ2SEQ}:nllb_prompt", ("batch_size", "device"), None, 1
    ),
    "madlad": Backend(
        f"{_SEQ2SEQ}:MadladTranslator",
        f"{_SEQ2SEQ}:madlad_prompt",
        ("batch_size", "device"),
        None,
        1,
    ),
    "aya": Backend(f"{_SEQ2SEQ}:AyaTranslator", None, ("batch_size", "device"), None, 1),
}
# Keys of a model entry that are not settings of its translator.
ENTRY_KEYS = (
    "name",
    "translator",
    "translator_kwargs",
    "prompt_fn",
    "prompt_kwargs",
    "shards",
    "gpus",
    "resources",
)


def backend_settings(model: dict[str, Any]) -> dict[str, Any]:
    """A built-in translator's settings: the entry's keys that are not the entry's own."""
    return {key: value for key, value in model.items() if key not in ENTRY_KEYS}


def translator_arguments(model: dict[str, Any]) -> dict[str, Any]:
    """What the translator of a model entry is built with."""
    if model["translator"] in BACKENDS:
        return backend_settings(model)
    return dict(model.get("translator_kwargs") or {})


def prompt_fn_spec(model: dict[str, Any]) -> str | None:
    """The prompt function of a model entry: its own, its backend's, or None for the default."""
    backend = BACKENDS.get(model["translator"])
    return model.get("prompt_fn") or (backend.prompt_fn if backend else None)


def model_gpus(model: dict[str, Any]) -> int:
    """GPUs one translate job of this model asks for."""
    if model.get("gpus") is not None:
        return int(model["gpus"])
    backend = BACKENDS.get(model["translator"])
    return backend.gpus(backend_settings(model)) if backend else 0


def import_object(spec: str) -> Any:
    """Resolve "package.module:name" to the named attribute."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"'{spec}' is not of the form 'package.module:name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(f"cannot import module '{module_name}' of '{spec}': {error}") from error
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImportError(f"module '{module_name}' has no attribute '{attribute}'") from None


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


def load_prompt_fn(spec: str | None, kwargs: dict[str, Any] | None) -> PromptFn:
    """The default template, a named prompt function, or the result of a named factory."""
    if spec is None:
        return build_prompt
    target: Callable[..., Any] = import_object(spec)
    prompt_fn = target(**kwargs) if kwargs is not None else target
    if not callable(prompt_fn):
        raise TypeError(f"prompt_fn '{spec}' did not give a callable")
    return prompt_fn
