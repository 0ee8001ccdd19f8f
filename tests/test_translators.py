"""Translators and prompt functions named in the configuration, loaded (translators)."""

from __future__ import annotations

import pytest

from bouquet_eval import Translator, build_prompt
from bouquet_eval.translators import load_prompt_fn, load_translator
from bouquet_eval.translators.bounds import CopySource


def suffixed_prompt(suffix: str):
    return lambda src_lang, tgt_lang, text: build_prompt(src_lang, tgt_lang, text) + suffix


def test_loading_translators_and_prompt_functions() -> None:
    assert isinstance(load_translator("copy-source", {}), CopySource)
    with pytest.raises(ImportError, match="cannot import module 'no_such_module'"):
        load_translator("no_such_module:X", {})
    with pytest.raises(TypeError, match="has no translate"):
        load_translator("builtins:object", {})

    class Upper:
        def translate(self, prompts: list[str]) -> list[str]:
            return [p.upper() for p in prompts]

    assert isinstance(Upper(), Translator)
    assert load_prompt_fn(None, None) is build_prompt
    assert load_prompt_fn("bouquet_eval.translators.prompt:build_prompt", None) is build_prompt
    made = load_prompt_fn("tests.test_translators:suffixed_prompt", {"suffix": "!"})
    assert made("eng_Latn", "fra_Latn", "x") == build_prompt("eng_Latn", "fra_Latn", "x") + "!"
