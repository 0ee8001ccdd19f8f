"""A reader of one MT Metrics Eval language pair that follows MTME's documented layout.

Written from the MTME README's "File organization and naming convention" and the behaviour of
its `data.EvalSet` loader (which cannot be installed here: it imports apache_beam): lines are
read with trailing whitespace stripped, references are `references/<lp>.<name>.txt`, system
outputs `system-outputs/<lp>/<system>.txt`, metric files `metric-scores/<lp>/<name>-<refs>.
<level>.score` holding `<system> <score>` lines, grouped by system at segment level, and every
text file must have one line per source segment. Any violation raises ValueError.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

LEVELS = ("sys", "domain", "doc", "seg")


def _lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip() for line in handle]


@dataclass
class LanguagePair:
    src: list[str]
    docs: list[tuple[str, str]]
    refs: dict[str, list[str]]
    systems: dict[str, list[str]]
    scores: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    """level -> metric name (NAME-REFS) -> system -> scores."""
    human: dict[str, dict[str, dict[str, list[float | None]]]] = field(default_factory=dict)
    """level -> human scoring method (NAME) -> system -> scores, None where not judged."""


def read_language_pair(test_set: Path, lp: str) -> LanguagePair:
    src = _lines(test_set / "sources" / f"{lp}.txt")
    doc_lines = _lines(test_set / "documents" / f"{lp}.docs")
    docs = []
    for line in doc_lines:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{lp}.docs: '{line}' is not DOMAIN DOCNAME")
        docs.append((fields[0], fields[1]))
    _check_contiguous([doc for _, doc in docs], lp)
    refs = {}
    for path in sorted((test_set / "references").glob(f"{lp}.*.txt")):
        name = path.name.split(".")[-2]
        if "-" in name or name in ("all", "src"):
            raise ValueError(f"invalid reference name {name}")
        refs[name] = _lines(path)
    systems = {
        path.name.removesuffix(".txt"): _lines(path)
        for path in sorted((test_set / "system-outputs" / lp).glob("*.txt"))
    }
    pair = LanguagePair(src, docs, refs, systems)
    for name, text in [("documents", doc_lines), *refs.items(), *systems.items()]:
        if len(text) != len(src):
            raise ValueError(f"{lp}: {name} has {len(text)} lines for {len(src)} segments")
    for path in sorted((test_set / "metric-scores" / lp).glob("*.score")):
        metric, level, extension = path.name.rsplit(".", 2)
        if extension != "score" or level not in LEVELS:
            raise ValueError(f"{path.name} is not NAME-REF.LEVEL.score")
        _basename, references = metric.rsplit("-", 1)
        if references not in ("src", "all") and not set(references.split(".")) <= set(refs):
            raise ValueError(f"{path.name}: unknown reference(s) {references}")
        scores: dict[str, list[float]] = defaultdict(list)
        for line in _lines(path):
            system, value = line.split()
            if value == "None":
                raise ValueError(f"{path.name}: metric scores may not be None")
            scores[system].append(float(value))
        expected = {"sys": 1, "seg": len(src), "doc": len({d for _, d in docs})}[level]
        for system, values in scores.items():
            if system not in systems:
                raise ValueError(f"{path.name}: unknown system {system}")
            if len(values) != expected:
                raise ValueError(f"{path.name}: {len(values)} scores for {system}, not {expected}")
        if set(scores) != set(systems) - set(refs):
            raise ValueError(f"{path.name}: scores for {sorted(scores)}, systems {sorted(systems)}")
        pair.scores.setdefault(level, {})[metric] = dict(scores)
    for path in sorted((test_set / "human-scores").glob(f"{lp}.*.score")):
        # human-scores/<lp>.<NAME>.<LEVEL>.score: a system's score may be None.
        name, level = path.name.removeprefix(f"{lp}.").removesuffix(".score").rsplit(".", 1)
        if level not in LEVELS or "." in name:
            raise ValueError(f"{path.name} is not {lp}.NAME.LEVEL.score")
        human: dict[str, list[float | None]] = defaultdict(list)
        for line in _lines(path):
            system, value = line.split()
            if system not in systems:
                raise ValueError(f"{path.name}: unknown system {system}")
            human[system].append(None if value == "None" else float(value))
        expected = {"sys": 1, "seg": len(src), "doc": len({d for _, d in docs})}[level]
        if any(len(values) != expected for values in human.values()):
            raise ValueError(f"{path.name}: not {expected} scores for every system")
        pair.human.setdefault(level, {})[name] = dict(human)
    return pair


def _check_contiguous(docs: list[str], lp: str) -> None:
    seen: set[str] = set()
    for i, doc in enumerate(docs):
        if doc in seen and docs[i - 1] != doc:
            raise ValueError(f"{lp}.docs: document {doc} is not contiguous")
        seen.add(doc)
