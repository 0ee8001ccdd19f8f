"""Built-in reference points that need no model.

- `copy-source`: the output is the source sentence, a wrong-language lower bound.
- `reference`: the output is the reference, the upper bound and a sanity check of the metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


class CopySource:
    def translate_rows(self, rows: pd.DataFrame) -> list[str]:
        return rows["src_text"].tolist()


class Reference:
    def translate_rows(self, rows: pd.DataFrame) -> list[str]:
        return rows["tgt_text"].tolist()
