"""Resumable outputs: current or not, and written atomically (bouquet_eval.core.freshness)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bouquet_eval.core.freshness import ResumableOutput


def write_text(text: str):
    return lambda path: path.write_text(text, encoding="utf-8")


def test_resumable_output(tmp_path: Path) -> None:
    output = ResumableOutput(tmp_path / "eng_Latn-fra_Latn.jsonl", {"setting": 1})
    assert not output.is_current()
    assert not output.restore_from_cache()
    output.publish(write_text("first\n"))
    assert output.is_current()
    assert output.cached.read_text() == "first\n"
    record = json.loads(output.sidecar.read_text())
    assert record["settings"] == {"setting": 1}

    output.path.write_text("edited by hand\n")
    assert not output.is_current()
    assert output.restore_from_cache()
    assert output.path.read_text() == "first\n"

    changed = ResumableOutput(output.path, {"setting": 2})
    assert not changed.is_current()
    assert not changed.restore_from_cache()
    output.path.unlink()
    assert output.restore_from_cache() and output.is_current()


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    output = ResumableOutput(tmp_path / "x.jsonl", {})

    def failing(path: Path) -> None:
        path.write_text("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        output.publish(failing)
    assert not output.path.exists() and not output.cached.exists()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
