"""Translations made elsewhere ("bring your own"): only scoring runs.

A folder holds one `<src>-<tgt>.jsonl` per direction, rows in the dataset's order with at least
`src_lang`, `tgt_lang`, `src_text` and `mt_text` (`ref_text` and `uniq_id` are checked when
present). Every row is checked against the dataset, and an error names the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bouquet_eval.config import expand_path
from bouquet_eval.data import Direction
from bouquet_eval.io import file_sha256, read_jsonl

if TYPE_CHECKING:
    import pandas as pd

REQUIRED_FIELDS = ("src_lang", "tgt_lang", "src_text", "mt_text")
# A provided field must equal the dataset's column of this name.
CHECKED_AGAINST = {"src_text": "src_text", "ref_text": "tgt_text", "uniq_id": "uniq_id"}


def provided_fingerprint(folder: Path, direction: Direction) -> str:
    """Changes when the provided file changes, so that its direction is taken again."""
    path = folder / f"{direction}.jsonl"
    return file_sha256(path) if path.is_file() else "missing"


class ProvidedTranslations:
    def __init__(self, path: str, limit: int | None = None) -> None:
        self.folder = expand_path(path)
        # With a limit, only the first sentences are evaluated, so a file may hold more.
        self.limit = limit
        if not self.folder.is_dir():
            raise FileNotFoundError(f"provided translations: folder {self.folder} not found")

    def translate_rows(self, rows: pd.DataFrame) -> list[str]:
        direction = Direction(rows["src_lang"].iloc[0], rows["tgt_lang"].iloc[0])
        path = self.folder / f"{direction}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"provided translations: {path} not found")
        provided = read_jsonl(path, required=REQUIRED_FIELDS)
        too_few = len(provided) < len(rows)
        if too_few or (self.limit is None and len(provided) != len(rows)):
            raise ValueError(
                f"{path}: {len(provided)} lines, but the dataset has {len(rows)} sentences "
                f"for {direction}"
            )
        for line, (given, expected) in enumerate(
            zip(provided.to_dict(orient="records"), rows.to_dict(orient="records"), strict=False),
            start=1,
        ):
            _check_row(path, line, given, expected, direction)
        return provided["mt_text"].head(len(rows)).tolist()


def _check_row(path: Path, line: int, given: dict, expected: dict, direction: Direction) -> None:
    for field, language in (("src_lang", direction.src_lang), ("tgt_lang", direction.tgt_lang)):
        if given[field] != language:
            raise ValueError(
                f"{path}, line {line}: {field} is '{given[field]}', expected '{language}' "
                "from the file name"
            )
    for field, column in CHECKED_AGAINST.items():
        if field in given and given[field] != expected[column]:
            raise ValueError(
                f"{path}, line {line}: {field} differs from the dataset's sentence "
                f"{expected['uniq_id']} (lines must follow the dataset's order)"
            )
    if not isinstance(given["mt_text"], str):
        raise ValueError(f"{path}, line {line}: mt_text is not a string")
