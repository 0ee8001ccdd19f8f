"""The prompt: language names and the default zero-shot template (translators.prompt)."""

from __future__ import annotations

import pytest

from bouquet_eval import build_prompt
from bouquet_eval.translators.prompt import language_name


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("eng_Latn", "English"),
        ("cmn_Hans", "Chinese (Simplified)"),
        ("cmn_Hant", "Chinese (Traditional)"),
        ("por_Latn_braz1246", "Brazilian Portuguese"),
        ("arz_Arab", "Egyptian Arabic"),
        ("hin_Deva", "Hindi"),
        ("swh_Latn", "Swahili"),
        ("srp_Latn", "Serbian (Latin)"),
    ],
)
def test_language_names(code: str, name: str) -> None:
    assert language_name(code) == name


def test_default_prompt_keeps_the_source_verbatim() -> None:
    source = "Liste :\n- pain 🎉"
    prompt = build_prompt("fra_Latn", "cmn_Hant", source)
    assert "from French into Chinese (Traditional)" in prompt
    assert prompt.endswith("\n\n" + source)
