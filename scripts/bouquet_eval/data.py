"""The BOUQuET dataset: where its files are, which directions exist, and reading one direction.

The benchmark configurations hold one parquet file per direction, named `<src>-<tgt>.parquet`,
either in the Hugging Face dataset repository or in a local copy of that layout.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bouquet_eval import hub
from bouquet_eval.config import ConfigError, expand_path

if TYPE_CHECKING:
    import pandas as pd

LANGUAGE_PATTERN = r"[a-z]{3}_[A-Z][a-z]{3}(?:_[a-z]{4}[0-9]{4})?"
_DIRECTION = re.compile(f"^({LANGUAGE_PATTERN})-({LANGUAGE_PATTERN})$")

REQUIRED_COLUMNS = ("src_lang", "tgt_lang", "src_text", "tgt_text", "uniq_id")

# Where each supported configuration keeps its per-direction files inside the repository.
HUB_LAYOUT = {
    "benchmark_sentence_level": "benchmark_data/sentence_level",
    "benchmark_paragraph_level": "benchmark_data/paragraph_level",
}
WITHOUT_THE_HUB = (
    "(a gated dataset such as facebook/bouquet needs a token, HF_TOKEN, of an account that "
    "accepted its conditions). Without the Hub, set dataset.path to a folder of "
    "<src>-<tgt>.parquet files, or leave out --configfile to run the bundled sample"
)


@dataclass(frozen=True, order=True)
class Direction:
    src_lang: str
    tgt_lang: str

    @classmethod
    def parse(cls, name: str) -> Direction:
        match = _DIRECTION.match(name)
        if match is None:
            raise ValueError(
                f"'{name}' is not a direction '<src>-<tgt>' of BOUQuET codes such as "
                "'eng_Latn-por_Latn_braz1246'"
            )
        return cls(match.group(1), match.group(2))

    @property
    def name(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DatasetSource:
    """A resolved dataset: a local folder of per-direction parquet files and what it is."""

    root: Path
    identity: dict[str, Any]

    def file(self, direction: Direction) -> Path:
        return self.root / f"{direction.name}.parquet"

    def directions(self) -> list[Direction]:
        """Every direction that has a file, sorted."""
        found = []
        for path in self.root.glob("*.parquet"):
            try:
                found.append(Direction.parse(path.stem))
            except ValueError as error:
                raise ConfigError(f"dataset file {path}: {error}") from None
        if not found:
            raise ConfigError(f"dataset folder {self.root} holds no <src>-<tgt>.parquet files")
        return sorted(found)

    def load(self, direction: Direction, limit: int | None = None) -> pd.DataFrame:
        """Read one direction's sentences, checked against the BOUQuET columns."""
        import pandas as pd
        import pyarrow.parquet as pq

        path = self.file(direction)
        if not path.is_file():
            raise FileNotFoundError(f"dataset file {path} not found (direction {direction})")
        columns = pq.read_schema(path).names
        missing = [column for column in REQUIRED_COLUMNS if column not in columns]
        if missing:
            raise ValueError(f"dataset file {path}: missing column(s) {', '.join(missing)}")
        frame = pd.read_parquet(path)
        if limit is not None:
            frame = frame.head(limit)
        for column, expected in (
            ("src_lang", direction.src_lang),
            ("tgt_lang", direction.tgt_lang),
        ):
            wrong = frame.index[frame[column] != expected]
            if len(wrong):
                row = int(wrong[0])
                raise ValueError(
                    f"dataset file {path}, row {row}: {column} is '{frame.at[row, column]}', "
                    f"expected '{expected}' from the file name"
                )
        for column in ("src_text", "tgt_text"):
            empty = frame.index[frame[column].isna()]
            if len(empty):
                raise ValueError(f"dataset file {path}, row {int(empty[0])}: {column} is missing")
        return frame.reset_index(drop=True)


def resolve_dataset(settings: dict[str, Any], *, fetch: bool = True) -> DatasetSource:
    """Find the dataset's files: a local folder, or the hub snapshot at the configured revision.

    From the hub, `fetch=True` resolves the revision on the Hub (a branch that moved is
    noticed) and downloads what the cache lacks; `fetch=False` reads only the local cache, as
    the workflow's jobs do once its main process has fetched (see `bouquet_eval.hub`).
    """
    if settings.get("path"):
        root = expand_path(settings["path"])
        if not root.is_dir():
            raise ConfigError(f"dataset.path: directory '{root}' not found")
        return DatasetSource(root.resolve(), {"path": str(root.resolve())})
    return _hub_snapshot(settings, fetch)


def _hub_snapshot(settings: dict[str, Any], fetch: bool) -> DatasetSource:
    subdir = f"{HUB_LAYOUT[settings['config']]}/{settings['split']}"
    name, revision = settings["name"], settings["revision"]
    what = f"dataset {name}@{revision} ({settings['config']}, {settings['split']})"
    patterns = [f"{subdir}/*.parquet"]
    snapshot = hub.snapshot(
        name, "dataset", revision, patterns, fetch=fetch, what=what, otherwise=WITHOUT_THE_HUB
    )
    root = snapshot / subdir
    if not root.is_dir():
        raise ConfigError(f"{what}: the repository has no {subdir}/ folder at that revision")
    identity = {
        "name": name,
        "config": settings["config"],
        "split": settings["split"],
        "revision": revision,
        # The snapshot folder is named after the commit the revision resolved to.
        "commit": snapshot.name,
    }
    return DatasetSource(root, identity)


def select_directions(
    available: Iterable[Direction],
    src_langs: Sequence[str] = (),
    tgt_langs: Sequence[str] = (),
    names: Sequence[str] = (),
) -> list[Direction]:
    """Directions to evaluate: an explicit list, or every available one passing the filters."""
    available = sorted(available)
    known_languages = {d.src_lang for d in available} | {d.tgt_lang for d in available}
    if names and (src_langs or tgt_langs):
        raise ConfigError("directions.list cannot be combined with directions.src_langs/tgt_langs")
    for key, languages in (("src_langs", src_langs), ("tgt_langs", tgt_langs)):
        unknown = [code for code in languages if code not in known_languages]
        if unknown:
            raise ConfigError(f"directions.{key}: unknown language code(s) {unknown}")
    if names:
        chosen = []
        available_set = set(available)
        for name in names:
            direction = Direction.parse(name)
            if direction not in available_set:
                unknown = sorted(
                    code
                    for code in (direction.src_lang, direction.tgt_lang)
                    if code not in known_languages
                )
                detail = f"unknown language code(s) {unknown}" if unknown else "not in the dataset"
                raise ConfigError(f"directions.list: '{name}': {detail}")
            chosen.append(direction)
        return sorted(chosen)
    selected = [
        d
        for d in available
        if (not src_langs or d.src_lang in src_langs) and (not tgt_langs or d.tgt_lang in tgt_langs)
    ]
    if not selected:
        raise ConfigError("directions: the filters select no direction of the dataset")
    return selected


def sentences_digest(frame: pd.DataFrame) -> str:
    """A digest of the sentences a translation depends on, to notice a changed dataset."""
    digest = hashlib.sha256()
    for uniq_id, src_text, tgt_text in zip(
        frame["uniq_id"], frame["src_text"], frame["tgt_text"], strict=True
    ):
        digest.update(f"{uniq_id}\x1f{src_text}\x1f{tgt_text}\x1e".encode())
    return digest.hexdigest()
