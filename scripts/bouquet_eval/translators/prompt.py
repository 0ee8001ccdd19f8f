"""The default zero-shot prompt and readable names for BOUQuET language codes."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from bouquet_eval.core.languages import LanguageCode

PromptFn = Callable[[str, str, str], str]
"""(src_lang, tgt_lang, src_text) -> the user message sent to the translator."""

PROMPT_TEMPLATE = (
    "Translate the following text from {src_name} into {tgt_name}. Keep its meaning, tone, "
    "formatting and line breaks. Answer with the translation only, without any explanation.\n"
    "\n"
    "{src_text}"
)

# Names that a generic language database renders in a way translators would not expect.
_LANGUAGE_NAMES = {
    "cmn_Hans": "Chinese (Simplified)",
    "cmn_Hant": "Chinese (Traditional)",
    "swh": "Swahili",
}
# Glottocode suffixes name a variety of the language.
_VARIETIES = {
    "braz1246": "Brazilian",
    "euro1245": "European",
    "akua1239": "Akuapem",
}


@cache
def language_name(code: str) -> str:
    """An English name for a code such as `eng_Latn`, `cmn_Hant` or `por_Latn_braz1246`."""
    import langcodes

    parsed = LanguageCode.parse(code)
    language, script = parsed.language, parsed.script
    if parsed.base in _LANGUAGE_NAMES:
        name = _LANGUAGE_NAMES[parsed.base]
    else:
        name = _LANGUAGE_NAMES.get(language) or langcodes.Language.get(language).display_name()
        name = name.replace(" (individual language)", "")
        if langcodes.Language.get(language).maximize().script != script:
            script_name = langcodes.Language.get(f"und-{script}").display_name()
            name = f"{name} ({script_name.removeprefix('Unknown language (').rstrip(')')})"
    if parsed.variety:
        name = f"{_VARIETIES.get(parsed.variety, parsed.variety)} {name}"
    return name


def build_prompt(src_lang: str, tgt_lang: str, src_text: str) -> str:
    """The default zero-shot prompt."""
    return PROMPT_TEMPLATE.format(
        src_name=language_name(src_lang), tgt_name=language_name(tgt_lang), src_text=src_text
    )
