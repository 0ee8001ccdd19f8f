"""Translations made elsewhere ("bring your own"): only scoring runs.

A folder holds one `<src>-<tgt>.jsonl` per direction, rows in the dataset's order with at least
`src_lang`, `tgt_lang`, `src_text` and `mt_text` (`ref_text` and `uniq_id` are checked when
present, and taken from the dataset otherwise). Every line is checked against the dataset
(bouquet_eval.data.translations), and an error names the file and line. The folder may be the
model's own output folder: the files are then scored where they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bouquet_eval.core.config import expand_path
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.outputs import translation_path
from bouquet_eval.data.translations import read_translations

if TYPE_CHECKING:
    import pandas as pd


def provided_file(folder: Path, direction: Direction) -> Path:
    return translation_path(folder, direction)


class ProvidedTranslations:
    def __init__(self, path: str, limit: int | None = None) -> None:
        self.folder = expand_path(path)
        # With a limit, only the first sentences are evaluated, so a file may hold more.
        self.limit = limit
        if not self.folder.is_dir():
            raise FileNotFoundError(f"provided translations: folder {self.folder} not found")

    def translate_rows(self, rows: pd.DataFrame) -> list[str]:
        direction = Direction(rows["src_lang"].iloc[0], rows["tgt_lang"].iloc[0])
        path = provided_file(self.folder, direction)
        if not path.is_file():
            raise FileNotFoundError(f"provided translations: {path} not found")
        checked = read_translations(
            path, direction, rows, extra_lines_allowed=self.limit is not None
        )
        return checked["mt_text"].tolist()
