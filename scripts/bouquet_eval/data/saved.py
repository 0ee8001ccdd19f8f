"""BOUQuET as a folder written by `datasets`' `save_to_disk`, read through `datasets`.

A common way to carry the dataset to an offline cluster is `load_dataset(...)` then
`save_to_disk(folder)`. The workflow takes one parquet file per direction, each an input of its
jobs (the provenance of every score), so such a folder, given as `dataset.path`, is read with
`datasets.load_from_disk` and laid out once, by the process that plans the run, as one
`<src>-<tgt>.parquet` per direction under `.snakemake/bouquet-eval/saved-datasets/<fingerprint>/`
of the working directory, in the dataset's row order. The fingerprint is the one `datasets`
keeps for the saved table, so a different saved dataset gets a folder of its own. Needs the
`saved` extra (`pip install bouquet-eval[saved]`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bouquet_eval.core.config import ConfigError

LAYOUTS = Path(".snakemake") / "bouquet-eval" / "saved-datasets"
_ROW = "__bouquet_eval_row"


def is_saved_by_datasets(folder: Path) -> bool:
    """Whether `folder` is what `Dataset.save_to_disk` or `DatasetDict.save_to_disk` writes."""
    return (folder / "state.json").is_file() or (folder / "dataset_dict.json").is_file()


def saved_layout(folder: Path, split: str, *, fetch: bool) -> tuple[Path, dict[str, Any]]:
    """The per-direction folder of the saved dataset at `folder` (`split` of a DatasetDict) and
    its identity for the manifest. `fetch`: whether this process may write the layout; the
    workflow's jobs only read the one its main process wrote."""
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
    fingerprint = saved._fingerprint
    root = (LAYOUTS / fingerprint).resolve()
    if not root.is_dir():
        if not fetch:
            raise ConfigError(f"dataset.path: '{folder}' has not been laid out in {root}")
        _write_layout(saved.data.table, root)
    identity = {"path": str(folder.resolve()), "saved_by": "datasets", "fingerprint": fingerprint}
    return root, identity


def _write_layout(table: Any, root: Path) -> None:
    """One parquet file per (src_lang, tgt_lang) of `table`, rows in their order, written to a
    temporary folder renamed into place: a killed write leaves no half layout."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    missing = [c for c in ("src_lang", "tgt_lang") if c not in table.column_names]
    if missing:
        raise ConfigError(f"dataset.path: the saved dataset has no column {', '.join(missing)}")
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
    start = 0
    for end in range(1, len(sources) + 1):
        if end == len(sources) or (sources[end], targets[end]) != (sources[start], targets[start]):
            name = f"{sources[start]}-{targets[start]}.parquet"
            if os.sep in name or name.startswith("."):
                raise ConfigError(f"dataset.path: the saved dataset has a direction named {name!r}")
            pq.write_table(table.slice(start, end - start), partial / name)
            start = end
    try:
        partial.rename(root)
    except OSError:  # another process laid it out meanwhile
        shutil.rmtree(partial)
