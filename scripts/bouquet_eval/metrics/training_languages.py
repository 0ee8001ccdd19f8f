"""The languages learned metrics' encoders were pretrained on, as their sources list them.

A learned metric's score on a language its encoder never saw is not comparable with one on a
language it did. Lists are compared at the level of the language (not the script): a BOUQuET
code's ISO 639-3 language is looked up as the source writes it, through the ISO 639-1 code
where there is one (`langcodes`), and through `MACROLANGUAGE_OF` for the individual languages
that the sources name by their macrolanguage (BOUQuET's `arb` is the sources' `ar`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from bouquet_eval.core.languages import LanguageCode

MACROLANGUAGE_OF: Mapping[str, str] = MappingProxyType(
    {
        "arb": "ar",  # Standard Arabic: only it, not the spoken varieties (arz, apc, ...)
        "cmn": "zh",
        "swh": "sw",
        "pes": "fa",
        "prs": "fa",
        "zsm": "ms",
        "ekk": "et",
        "lvs": "lv",
        "als": "sq",
        "azj": "az",
        "uzn": "uz",
        "npi": "ne",
        "ory": "or",
        "gaz": "om",
        "plt": "mg",
        "khk": "mn",
        "ydd": "yi",
        "pbt": "ps",
        "kmr": "ku",
        "nob": "no",
        "fil": "tl",
        "tgl": "tl",
    }
)
"""ISO 639-3 individual language -> the macrolanguage code the sources list (ISO 639-3's
macrolanguage mappings; for each, the member the sources' data is mostly in)."""


@dataclass(frozen=True)
class TrainingLanguages:
    source: str
    """Where the list comes from."""
    codes: frozenset[str]
    """As the source writes them: ISO 639-1 where there is one, else ISO 639-3."""

    def covers(self, code: str) -> bool:
        """Whether the language of a BOUQuET code (`arb_Arab`) is in the list."""
        return _source_code(LanguageCode.parse(code).language) in self.codes | _aliases(self.codes)

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def of_iso639_3(cls, source: str, languages: set[str]) -> TrainingLanguages:
        """A list that its source writes in ISO 639-3 codes, written as the lists are."""
        return cls(source, frozenset(map(_source_code, languages)))


# Codes the sources use that ISO 639-1 has since replaced.
_RENAMED = MappingProxyType({"iw": "he", "fil": "tl"})


@cache
def _aliases(codes: frozenset[str]) -> frozenset[str]:
    return frozenset(_RENAMED.get(code, code) for code in codes)


@cache
def _source_code(language: str) -> str:
    """An ISO 639-3 language as the sources write it."""
    if language in MACROLANGUAGE_OF:
        return MACROLANGUAGE_OF[language]
    import langcodes

    short = langcodes.Language.get(language).language or language
    return _RENAMED.get(short, short)


XLMR_LANGUAGES = TrainingLanguages(
    "XLM-R (Conneau et al., 2020, CC-100), the encoder of COMET-22, CometKiwi and xCOMET: "
    "100 languages, of which 93 distinct; the other 7 are romanized Bengali, Hindi, Tamil, "
    "Telugu and Urdu, Burmese in Zawgyi, and Traditional Chinese",
    frozenset(
        [
            "af",
            "am",
            "ar",
            "as",
            "az",
            "be",
            "bg",
            "bn",
            "br",
            "bs",
            "ca",
            "cs",
            "cy",
            "da",
            "de",
            "el",
            "en",
            "eo",
            "es",
            "et",
            "eu",
            "fa",
            "fi",
            "fr",
            "fy",
            "ga",
            "gd",
            "gl",
            "gu",
            "ha",
            "he",
            "hi",
            "hr",
            "hu",
            "hy",
            "id",
            "is",
            "it",
            "ja",
            "jv",
            "ka",
            "kk",
            "km",
            "kn",
            "ko",
            "ku",
            "ky",
            "la",
            "lo",
            "lt",
            "lv",
            "mg",
            "mk",
            "ml",
            "mn",
            "mr",
            "ms",
            "my",
            "ne",
            "nl",
            "no",
            "om",
            "or",
            "pa",
            "pl",
            "ps",
            "pt",
            "ro",
            "ru",
            "sa",
            "sd",
            "si",
            "sk",
            "sl",
            "so",
            "sq",
            "sr",
            "su",
            "sv",
            "sw",
            "ta",
            "te",
            "th",
            "tl",
            "tr",
            "ug",
            "uk",
            "ur",
            "uz",
            "vi",
            "xh",
            "yi",
            "zh",
        ]
    ),
)

MT5_LANGUAGES = TrainingLanguages(
    "mT5 (Xue et al., 2021, mC4), the encoder of MetricX-24: the 101 languages of the "
    "google/mt5 model cards, of which one is `und` (undetermined) and left out here",
    frozenset(
        [
            "af",
            "am",
            "ar",
            "az",
            "be",
            "bg",
            "bn",
            "ca",
            "ceb",
            "co",
            "cs",
            "cy",
            "da",
            "de",
            "el",
            "en",
            "eo",
            "es",
            "et",
            "eu",
            "fa",
            "fi",
            "fil",
            "fr",
            "fy",
            "ga",
            "gd",
            "gl",
            "gu",
            "ha",
            "haw",
            "hi",
            "hmn",
            "ht",
            "hu",
            "hy",
            "ig",
            "is",
            "it",
            "iw",
            "ja",
            "jv",
            "ka",
            "kk",
            "km",
            "kn",
            "ko",
            "ku",
            "ky",
            "la",
            "lb",
            "lo",
            "lt",
            "lv",
            "mg",
            "mi",
            "mk",
            "ml",
            "mn",
            "mr",
            "ms",
            "mt",
            "my",
            "ne",
            "nl",
            "no",
            "ny",
            "pa",
            "pl",
            "ps",
            "pt",
            "ro",
            "ru",
            "sd",
            "si",
            "sk",
            "sl",
            "sm",
            "sn",
            "so",
            "sq",
            "sr",
            "st",
            "su",
            "sv",
            "sw",
            "ta",
            "te",
            "tg",
            "th",
            "tr",
            "uk",
            "ur",
            "uz",
            "vi",
            "xh",
            "yi",
            "yo",
            "zh",
            "zu",
        ]
    ),
)
