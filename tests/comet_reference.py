"""What COMET-family scores are compared on and with: the bundled sample's sentence pairs, each
with a translation, and unbabel-comet's own `comet-score` command on them.

Needs the COMET environment for `comet_score` (its command) and for scoring.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bouquet_eval.metrics.comet import CHECKPOINT, XComet

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "parquet"


def sample_pairs() -> pd.DataFrame:
    """Every sentence pair of the bundled sample (480), with a translation that differs from
    the reference in three rows of four: words rotated, cut short, or another row's reference.

    comet-score reads one sentence per line, stripped: paragraphs are put onto one line.
    """
    frames = [pd.read_parquet(path) for path in sorted(SAMPLE.glob("*.parquet"))]
    rows = pd.concat(frames, ignore_index=True).rename(columns={"tgt_text": "ref_text"})
    for column in ("src_text", "ref_text"):
        rows[column] = rows[column].str.replace(r"\s*\n\s*", " ", regex=True).str.strip()
    translations = []
    for index, reference in enumerate(rows["ref_text"]):
        words = reference.split()
        kind = index % 4
        if kind == 0:
            translations.append(reference)
        elif kind == 1:
            translations.append(" ".join(words[1:] + words[:1]))
        elif kind == 2:
            translations.append(" ".join(words[: max(1, len(words) // 2)]))
        else:
            translations.append(rows["ref_text"].iloc[(index + 7) % len(rows)])
    rows["mt_text"] = translations
    return rows


def comet_score(
    checkpoint: Path, rows: pd.DataFrame, reference: bool, folder: Path
) -> list[dict[str, Any]]:
    """unbabel-comet's `comet-score` on the rows, on the CPU: one record per row (its
    `--to_json`: src, mt, ref, COMET, and xCOMET's `errors` where it found some)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, column in (("src", "src_text"), ("mt", "mt_text"), ("ref", "ref_text")):
        if any("\n" in text or text != text.strip() for text in rows[column]):
            raise ValueError(f"comet-score reads {column} one stripped line per sentence")
        files[name] = folder / f"{name}.txt"
        files[name].write_text("\n".join(rows[column]) + "\n", encoding="utf-8")
    output = folder / "scores.json"
    command = [
        str(Path(sys.executable).parent / "comet-score"),
        "-s", str(files["src"]),
        "-t", str(files["mt"]),
        *(["-r", str(files["ref"])] if reference else []),
        "--model", str(checkpoint / CHECKPOINT),
        "--gpus", "0",
        "--batch_size", "16",
        "--to_json", str(output),
        "--quiet",
    ]  # fmt: skip
    # One thread, as the tests' own scoring (tests/test_comet.py says why).
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run(command, check=True, capture_output=True, env=environment)
    (records,) = json.loads(output.read_text(encoding="utf-8")).values()
    if len(records) != len(rows):
        raise ValueError(f"comet-score gave {len(records)} scores for {len(rows)} rows")
    return list(records)


@dataclass(frozen=True)
class Scored:
    """One scoring of some sentences: their scores, and for xCOMET each one's error spans."""

    scores: list[float]
    spans: list[list[dict[str, Any]]] | None = None

    @classmethod
    def of(cls, shape: str, columns: Mapping[str, Sequence[Any]]) -> Scored:
        """From our metric's `score` columns."""
        spans = columns.get(XComet.spans_column)
        return cls(
            [float(score) for score in columns[shape]],
            [json.loads(value) for value in spans] if spans is not None else None,
        )

    @classmethod
    def of_records(cls, shape: str, records: Sequence[Mapping[str, Any]]) -> Scored:
        """From comet-score's records."""
        spans = [list(record.get("errors", [])) for record in records]
        return cls([record["COMET"] for record in records], spans if shape == "xcomet" else None)

    def compare(self, other: Scored) -> tuple[float, float, int]:
        """The largest and the mean absolute score difference over the sentences whose error
        spans (text, start, end, severity) agree, and how many sentences' spans do not."""
        agree = [True] * len(self.scores)
        if self.spans is not None and other.spans is not None:
            agree = [
                span_marks(a) == span_marks(b) for a, b in zip(self.spans, other.spans, strict=True)
            ]
        differences = [
            abs(a - b) for a, b, same in zip(self.scores, other.scores, agree, strict=True) if same
        ]
        return max(differences), sum(differences) / len(differences), agree.count(False)


def span_marks(spans: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(span["text"], span["start"], span["end"], span["severity"]) for span in spans]
