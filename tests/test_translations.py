"""Every line of a direction's translations is checked against the dataset before scoring."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.core.io import write_jsonl
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.translations import read_translations

DIRECTION = Direction("eng_Latn", "fra_Latn")
ROWS = pd.DataFrame(
    {
        "src_lang": ["eng_Latn"] * 3,
        "tgt_lang": ["fra_Latn"] * 3,
        "src_text": ["One.", "Two\nlines.", "Three 🎉"],
        "tgt_text": ["Un.", "Deux\nlignes.", "Trois 🎉"],
        "uniq_id": ["s1", "s2", "s3"],
    }
)


def lines(**changes) -> list[dict]:
    """The four fields a line needs, one line per sentence; `changes` edit line 2."""
    result = [
        {"src_lang": "eng_Latn", "tgt_lang": "fra_Latn", "src_text": text, "mt_text": f"<{text}>"}
        for text in ROWS["src_text"]
    ]
    result[1].update(changes)
    return result


def write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_four_fields_are_enough_and_the_rest_comes_from_the_dataset(tmp_path: Path) -> None:
    frame = read_translations(write(tmp_path / "t.jsonl", lines()), DIRECTION, ROWS)
    assert list(frame.columns) == ["src_lang", "tgt_lang", "src_text", "ref_text", "mt_text",
                                   "uniq_id"]  # fmt: skip
    assert frame["ref_text"].tolist() == ROWS["tgt_text"].tolist()
    assert frame["uniq_id"].tolist() == ["s1", "s2", "s3"]
    assert frame["mt_text"].tolist() == ["<One.>", "<Two\nlines.>", "<Three 🎉>"]


def test_what_the_workflow_writes_reads_back(tmp_path: Path) -> None:
    written = pd.DataFrame(
        {
            "src_lang": ROWS["src_lang"],
            "tgt_lang": ROWS["tgt_lang"],
            "src_text": ROWS["src_text"],
            "ref_text": ROWS["tgt_text"],
            "mt_text": ["a", "b", "c"],
            "uniq_id": ROWS["uniq_id"],
            "mt_raw": ["<think>x</think>a", "b", "c"],
        }
    )
    path = tmp_path / "t.jsonl"
    write_jsonl(path, written)
    pd.testing.assert_frame_equal(read_translations(path, DIRECTION, ROWS), written)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (lines()[:2], "2 line(s), but the dataset has 3 sentence(s) for eng_Latn-fra_Latn"),
        ([*lines(), lines()[0]], "4 line(s), but the dataset has 3 sentence(s)"),
        ([lines()[0], lines()[2], lines()[1]], "line 2: src_text differs from the dataset's "
                                               "sentence 's2'"),
        (lines(uniq_id="s9"), "line 2: uniq_id differs from the dataset's sentence 's2'"),
        (lines(ref_text="Autre."), "line 2: ref_text differs from the dataset's sentence 's2'"),
        (lines(tgt_lang="deu_Latn"), "line 2: tgt_lang is 'deu_Latn', expected 'fra_Latn'"),
        (lines(mt_text=None), "line 2: mt_text is null, not a string"),
        (lines(mt_text=7), "line 2: mt_text is int, not a string"),
        (lines(mt_text="bad \ud800 text"), "line 2: mt_text holds an unpaired surrogate (U+D800)"),
        ([lines()[0], ["a list"]], "line 2: expected a JSON object, found list"),
        ([lines()[0], {"src_lang": "eng_Latn"}], "line 2: missing field(s) tgt_lang, src_text, "
                                                 "mt_text"),
    ],
)  # fmt: skip
def test_each_fault_is_named_with_its_file_and_line(tmp_path: Path, content, message) -> None:
    path = write(tmp_path / "t.jsonl", content)
    with pytest.raises(ValueError, match="^" + str(path).replace(".", r"\.")) as raised:
        read_translations(path, DIRECTION, ROWS)
    assert message in str(raised.value)


def test_a_line_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(lines()[0]) + "\n{not json\n")
    with pytest.raises(ValueError) as raised:
        read_translations(path, DIRECTION, ROWS)
    assert str(raised.value) == (
        f"{path}, line 2, column 2: not valid JSON: Expecting property name enclosed in double "
        "quotes, found 'n'"
    )
    # A raw tab inside a string: the reason is whole, not "Invalid control character at".
    path.write_text(json.dumps(lines()[0]) + '\n{"mt_text": "a\tb"}\n')
    with pytest.raises(ValueError) as raised:
        read_translations(path, DIRECTION, ROWS)
    assert str(raised.value) == (
        f"{path}, line 2, column 15: not valid JSON: Invalid control character, found '\\t'"
    )


def test_with_a_limit_a_file_may_hold_more_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [*lines(), {"anything": "beyond the limit"}])
    frame = read_translations(path, DIRECTION, ROWS.head(2), extra_lines_allowed=True)
    assert frame["mt_text"].tolist() == ["<One.>", "<Two\nlines.>"]


def test_blank_lines_after_the_last_sentence_are_no_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", lines())
    path.write_text(path.read_text() + "\n  \n")
    assert read_translations(path, DIRECTION, ROWS)["mt_text"].tolist()[2] == "<Three 🎉>"
    # A line after them still counts.
    path.write_text(path.read_text() + json.dumps(lines()[0]) + "\n")
    with pytest.raises(ValueError, match="4 line"):
        read_translations(path, DIRECTION, ROWS)


def test_a_translate_job_s_lines_are_checked_once(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `provided` model's translate job checks every line of the file it is given; scoring
    then only parses what the job wrote, and checks a file that is not (edited since, or
    scored where it was brought)."""
    from bouquet_eval.data.dataset import resolve_dataset
    from bouquet_eval.scoring import score
    from bouquet_eval.translation.translate import translate_model

    source = resolve_dataset({"path": str(dataset)}, fetch=False)
    direction = Direction("eng_Latn", "fra_Latn")
    rows = source.load(direction)
    brought = tmp_path / "brought"
    brought.mkdir()
    write(brought / f"{direction}.jsonl", [
        {"src_lang": "eng_Latn", "tgt_lang": "fra_Latn", "src_text": text, "mt_text": text.upper()}
        for text in rows["src_text"]
    ])  # fmt: skip
    model = {"name": "mine", "translator": "provided", "path": str(brought)}
    translate_model(model, [direction], source, tmp_path / "runs" / "mine")
    written = tmp_path / "runs" / "mine" / f"{direction}.jsonl"
    checked: list[Path] = []

    def read_and_check(path: Path, *arguments: object) -> pd.DataFrame:
        checked.append(path)
        return read_translations(path, *arguments)  # type: ignore[arg-type]

    monkeypatch.setattr(score, "read_translations", read_and_check)
    frame = score.translations_to_score(written.parent, direction, source, None)
    assert frame["mt_text"].tolist() == rows["src_text"].str.upper().tolist()
    assert checked == []
    # Edited by hand since: checked, and the fault named with its line.
    edited = written.read_text().splitlines(keepends=True)
    edited[3] = edited[3].replace('"src_text": "', '"src_text": "x')
    written.write_text("".join(edited))
    with pytest.raises(ValueError, match=r"\.jsonl, line 4: src_text differs"):
        score.translations_to_score(written.parent, direction, source, None)
    # Scored where they were brought (no job wrote them): checked.
    assert score.translations_to_score(brought, direction, source, None)["mt_text"].tolist()
    assert checked == [written, brought / f"{direction}.jsonl"]
