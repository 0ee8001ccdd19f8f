"""BOUQuET language codes and directions, parsed in this one place.

A code is an ISO 639-3 language, an ISO 15924 script and, for some languoids, a glottocode
naming the variety: `eng_Latn`, `cmn_Hant`, `por_Latn_braz1246`. Codes use `_` only, so a
direction `<src>-<tgt>` splits unambiguously at its `-`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LANGUAGE_PATTERN = r"[a-z]{3}_[A-Z][a-z]{3}(?:_[a-z]{4}[0-9]{4})?"
"""A BOUQuET code (without anchors); the configuration schema is built from it too."""
DIRECTION_PATTERN = f"{LANGUAGE_PATTERN}-{LANGUAGE_PATTERN}"

_CODE = re.compile(r"([a-z]{3})_([A-Z][a-z]{3})(?:_([a-z]{4}[0-9]{4}))?")
_DIRECTION = re.compile(f"({LANGUAGE_PATTERN})-({LANGUAGE_PATTERN})")


@dataclass(frozen=True)
class LanguageCode:
    language: str
    """ISO 639-3, e.g. `por`."""
    script: str
    """ISO 15924, e.g. `Latn`."""
    variety: str | None = None
    """A glottocode such as `braz1246`, or None."""

    @classmethod
    def parse(cls, code: str) -> LanguageCode:
        match = _CODE.fullmatch(code)
        if match is None:
            raise ValueError(
                f"'{code}' is not a BOUQuET language code such as 'eng_Latn' or 'por_Latn_braz1246'"
            )
        return cls(*match.groups())

    @property
    def base(self) -> str:
        """The code without its variety: `por_Latn` for `por_Latn_braz1246`."""
        return f"{self.language}_{self.script}"

    def __str__(self) -> str:
        return self.base if self.variety is None else f"{self.base}_{self.variety}"


def split_direction(name: str) -> tuple[str, str]:
    """(source code, target code) of a direction name such as `eng_Latn-por_Latn_braz1246`."""
    match = _DIRECTION.fullmatch(name)
    if match is None:
        raise ValueError(
            f"'{name}' is not a direction '<src>-<tgt>' of BOUQuET codes such as "
            "'eng_Latn-por_Latn_braz1246'"
        )
    return match.group(1), match.group(2)
