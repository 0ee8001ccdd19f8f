"""Reading a direction's translations and checking every line against the dataset.

Whatever made them (a translate job, another tool, a person), translations are checked before
they are scored: one JSON object per line, in the dataset's order, one line per sentence, each
with the direction's languages, the dataset's source text and a string translation. The
reference and sentence id come from the dataset; a line that carries them must agree. An error
names the file and the line.
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval.core.io import TRANSLATION_COLUMNS, json_reason
from bouquet_eval.data.dataset import Direction

if TYPE_CHECKING:
    import pandas as pd

REQUIRED_FIELDS = ("src_lang", "tgt_lang", "src_text", "mt_text")
"""What a line must hold; the rest comes from the dataset."""
_REQUIRED = frozenset(REQUIRED_FIELDS)
_AGREES_WITH = {"src_text": "src_text", "ref_text": "tgt_text", "uniq_id": "uniq_id"}
"""A field of a line -> the dataset column it must equal."""
_KEPT_EXTRA = ("mt_raw",)


def read_translations(
    path: Path, direction: Direction, rows: pd.DataFrame, extra_lines_allowed: bool = False
) -> pd.DataFrame:
    """The translations in `path`, checked against the dataset's `rows` of `direction`.

    Returns the translation columns (and `mt_raw` where given) aligned with `rows`.
    `extra_lines_allowed`: the file may hold more lines than `rows` (a run with a `limit`
    evaluates the first sentences only); the lines beyond are not read. Blank lines after the
    last sentence are ignored.
    """
    # The dataset's columns as lists, each line checked against its position in them: a record
    # per row (`to_dict`) would cost more than the checks themselves.
    expected = {column: rows[column].tolist() for column in _AGREES_WITH.values()}
    sentences = len(rows)
    lines: list[dict[str, Any]] = []
    lines_beyond = 0
    with open(path, encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if number > sentences:
                if extra_lines_allowed:
                    break
                # Blank lines after the last sentence (an editor's final newline) are no lines.
                if text.strip():
                    lines_beyond += 1
                continue
            lines.append(_check_line(path, number, text, expected, direction))
    counted = len(lines) + lines_beyond
    if counted != sentences:
        raise ValueError(
            f"{path}: {counted} line(s), but the dataset has {sentences} sentence(s) for "
            f"{direction}: one line per sentence, in the dataset's order"
        )
    return _frame(rows, lines)


def read_checked_translations(path: Path, rows: pd.DataFrame) -> pd.DataFrame:
    """What `read_translations` returns, from a file already checked against these `rows` (a
    record says so, and the file is unchanged since): its lines are only parsed. A score job
    reads what a translate job wrote, which checked each line it wrote (a `provided` model's
    against the dataset, line by line); gathering a direction's scores reads what the score
    jobs checked. Checking them again would cost either more than the rest of its reading.
    ValueError where the file does not hold one line per row, as a checked file does."""
    with open(path, encoding="utf-8") as handle:
        texts = handle.readlines()
    if len(texts) < len(rows) or any(text.strip() for text in texts[len(rows) :]):
        raise ValueError(f"{path}: not one line for each of the {len(rows)} sentences checked")
    return _frame(rows, [json.loads(text) for text in islice(texts, len(rows))])


def _frame(rows: pd.DataFrame, lines: list[dict[str, Any]]) -> pd.DataFrame:
    """The translation columns: the dataset's `rows` with each line's translation beside."""
    # The dataset's columns are taken as they are: through numpy, each would be converted twice.
    frame = (
        rows[["src_lang", "tgt_lang", "src_text", "tgt_text", "uniq_id"]]
        .rename(columns={"tgt_text": "ref_text"})
        .reset_index(drop=True)
    )
    frame.insert(
        TRANSLATION_COLUMNS.index("mt_text"), "mt_text", [line["mt_text"] for line in lines]
    )
    for column in _KEPT_EXTRA:
        if any(column in line for line in lines):
            frame[column] = [line.get(column) for line in lines]
    return frame


def _check_line(
    path: Path, number: int, text: str, expected: dict[str, list[Any]], direction: Direction
) -> dict[str, Any]:
    """Line `number` (from 1), checked against row `number` of the dataset's `expected` columns."""
    try:
        line = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}, line {number}, column {error.colno}: {json_reason(error)}"
        ) from None
    fault = _line_fault(number, line, expected, direction)
    if fault is not None:
        # The place is written only for a line at fault: it costs more than a line's checks.
        raise ValueError(f"{path}, line {number}: {fault}")
    return line


def _line_fault(
    number: int, line: Any, expected: dict[str, list[Any]], direction: Direction
) -> str | None:
    """What is wrong with a parsed line, or None."""
    if not isinstance(line, dict):
        return f"expected a JSON object, found {type(line).__name__}"
    if not line.keys() >= _REQUIRED:
        missing = [field for field in REQUIRED_FIELDS if field not in line]
        return f"missing field(s) {', '.join(missing)}"
    for field, language in (("src_lang", direction.src_lang), ("tgt_lang", direction.tgt_lang)):
        if line[field] != language:
            return f"{field} is {line[field]!r}, expected '{language}' from the file name"
    for field, column in _AGREES_WITH.items():
        if field in line and line[field] != expected[column][number - 1]:
            return (
                f"{field} differs from the dataset's sentence "
                f"{expected['uniq_id'][number - 1]!r} "
                f"(line {number} of {direction}); lines must follow the dataset's order"
            )
    fault = _text_fault("mt_text", line["mt_text"])
    for field in _KEPT_EXTRA:
        if fault is None and field in line:
            fault = _text_fault(field, line[field])
    return fault


def _text_fault(field: str, value: Any) -> str | None:
    if not isinstance(value, str):
        found = "null" if value is None else type(value).__name__
        return f"{field} is {found}, not a string"
    # Encoding fails on exactly the unpaired surrogates, at C speed; most texts have none.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        surrogate = value[error.start]
        return (
            f"{field} holds an unpaired surrogate (U+{ord(surrogate):04X}), which is "
            "not text; fix the program that wrote it"
        )
    return None
