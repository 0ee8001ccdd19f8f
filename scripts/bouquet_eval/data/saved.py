"""BOUQuET as a folder written by `datasets`' `save_to_disk`, read through `datasets`.

A common way to carry the dataset to an offline cluster is `load_dataset(...)` then
`save_to_disk(folder)`. The workflow takes one parquet file per direction, each an input of its
jobs (the provenance of every score), so such a folder, given as `dataset.path`, is read with
`datasets.load_from_disk` and laid out once as one `<src>-<tgt>.parquet` per direction under
`.snakemake/bouquet-eval/saved-datasets/<fingerprint>/` of the working directory, in the
dataset's row order. The fingerprint is the one `datasets` keeps for the saved table, so a
different saved dataset gets a folder of its own. Needs the `saved` extra
(`pip install bouquet-eval[saved]`).

The workflow writes nothing while Snakemake parses it: its plan reads the saved table (memory
mapped) and names the directions from its language columns (`saved_layout(write=False)`); the
main process writes the layout once Snakemake plans the run (`write_layout`, through
`data.dataset.prepare_dataset`), before any job starts; a job only reads the layout.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bouquet_eval.core.config import ConfigError

LAYOUTS = Path(".snakemake") / "bouquet-eval" / "saved-datasets"
_ROW = "__bouquet_eval_row"


@dataclass(frozen=True)
class SavedTable:
    """A table that `datasets` saved: its folder, the split taken from a DatasetDict, and the
    fingerprint `datasets` keeps for it."""

    folder: Path
    split: str
    fingerprint: str


def is_saved_by_datasets(folder: Path) -> bool:
    """Whether `folder` is what `Dataset.save_to_disk` or `DatasetDict.save_to_disk` writes."""
    return (folder / "state.json").is_file() or (folder / "dataset_dict.json").is_file()


def saved_layout(
    folder: Path, split: str, *, fetch: bool, write: bool = True
) -> tuple[Path, dict[str, Any], tuple[str, ...] | None, SavedTable | None]:
    """The per-direction folder of the saved dataset at `folder` (`split` of a DatasetDict), its
    identity for the manifest and, while the folder is yet to be written, the names its files
    will have and the table to write them from (`write_layout`); None for both once written.

    `fetch`: whether this process may lay the dataset out, now where `write`, else later; the
    workflow's jobs only read the layout its main process wrote."""
    saved = _load(folder, split)
    fingerprint = saved._fingerprint
    root = (LAYOUTS / fingerprint).resolve()
    identity = {"path": str(folder.resolve()), "saved_by": "datasets", "fingerprint": fingerprint}
    if root.is_dir():
        return root, identity, None, None
    if not fetch:
        raise ConfigError(f"dataset.path: '{folder}' has not been laid out in {root}")
    if write:
        _write_layout(saved.data.table, root)
        return root, identity, None, None
    return root, identity, _file_names(saved.data.table), SavedTable(folder, split, fingerprint)


def write_layout(table: SavedTable, root: Path) -> None:
    """Lay `table` out in `root`, unless done already; ConfigError when its folder holds another
    table by now (saved again since the plan was made from it)."""
    if root.is_dir():
        return
    saved = _load(table.folder, table.split)
    if saved._fingerprint != table.fingerprint:
        raise ConfigError(
            f"dataset.path: '{table.folder}' was saved again while the run was planned "
            f"(fingerprint {table.fingerprint}, now {saved._fingerprint}): start it again"
        )
    _write_layout(saved.data.table, root)


def _load(folder: Path, split: str) -> Any:
    """The saved table (a `datasets.Dataset`, its arrow files memory mapped: nothing written)."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"dataset.path: '{folder}' was written by `datasets`' save_to_disk; reading it needs "
            "the `datasets` package (pip install 'bouquet-eval[saved]')",
            "dataset.path",
        ) from None
    saved = datasets.load_from_disk(str(folder))
    if isinstance(saved, datasets.DatasetDict):
        if split not in saved:
            raise ConfigError(
                f"dataset.path: '{folder}' holds the splits {sorted(saved)}, not '{split}' "
                "(dataset.split)",
                "dataset.split",
            )
        saved = saved[split]
    return saved


def _file_names(table: Any) -> tuple[str, ...]:
    """The names of the layout's files, one per (src_lang, tgt_lang) of `table`, sorted."""
    _check_columns(table)
    pairs = table.select(["src_lang", "tgt_lang"]).group_by(["src_lang", "tgt_lang"]).aggregate([])
    sources = pairs.column("src_lang").to_pylist()
    targets = pairs.column("tgt_lang").to_pylist()
    return tuple(sorted(_file_name(s, t) for s, t in zip(sources, targets, strict=True)))


def _check_columns(table: Any) -> None:
    missing = [c for c in ("src_lang", "tgt_lang") if c not in table.column_names]
    if missing:
        raise ConfigError(f"dataset.path: the saved dataset has no column {', '.join(missing)}")


def _file_name(source: str, target: str) -> str:
    name = f"{source}-{target}.parquet"
    if os.sep in name or name.startswith("."):
        raise ConfigError(f"dataset.path: the saved dataset has a direction named {name!r}")
    return name


def _write_layout(table: Any, root: Path) -> None:
    """One parquet file per (src_lang, tgt_lang) of `table`, rows in their order, written to a
    temporary folder renamed into place: a killed write leaves no half layout."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _check_columns(table)
    table = table.append_column(_ROW, pa.array(range(table.num_rows), pa.int64()))
    # One sort, then contiguous runs: a filter per direction would read the table 1062 times.
    table = table.sort_by(
        [("src_lang", "ascending"), ("tgt_lang", "ascending"), (_ROW, "ascending")]
    )
    sources = table.column("src_lang").to_pylist()
    targets = table.column("tgt_lang").to_pylist()
    table = table.drop_columns([_ROW])
    root.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=root.parent, prefix=f"{root.name}."))
    try:
        start = 0
        for end in range(1, len(sources) + 1):
            if end == len(sources) or (sources[end], targets[end]) != (
                sources[start],
                targets[start],
            ):
                name = _file_name(sources[start], targets[start])
                pq.write_table(table.slice(start, end - start), partial / name)
                start = end
        partial.rename(root)
    except BaseException:
        # A failed write, or another process laid it out meanwhile (the rename fails).
        shutil.rmtree(partial)
        if not root.is_dir():
            raise
