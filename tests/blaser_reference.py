"""sonar-space's own BLASER 2.0 pipeline, called as its README calls it, for the tests to compare
the workflow's scores with: a `TextToEmbeddingModelPipeline` and the BLASER models loaded by
their card names, each direction's sources, references and translations embedded in three
calls, then scored by the models. No deduplication, no cache, one direction at a time.

The tiny models' cards (tests/blaser_checkpoints.py) are found where fairseq2 looks for a
user's own: FAIRSEQ2_USER_ASSET_DIR, set for this program alone (`readme_scores` runs it in a
process of its own). Needs the BLASER environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

REPOSITORY = Path(__file__).resolve().parent.parent


def readme_scores(
    python: Path, cards: Path, rows: pd.DataFrame, codes: Mapping[str, str], folder: Path
) -> dict[str, list[float]]:
    """`blaser` and `blaser_qe` scores of `rows` (src_lang, tgt_lang, src_text, ref_text,
    mt_text) by sonar-space's README pipeline, in their order; `codes`: each BOUQuET code's
    SONAR code, as the test writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    rows.reset_index(drop=True).to_parquet(folder / "rows.parquet")
    (folder / "codes.json").write_text(json.dumps(dict(codes)))
    environment = {**os.environ, "FAIRSEQ2_USER_ASSET_DIR": str(cards)}
    subprocess.run(
        [str(python), "-m", "tests.blaser_reference", str(folder)],
        cwd=REPOSITORY,
        env=environment,
        check=True,
    )
    return json.loads((folder / "scores.json").read_text())


def main(folder: Path) -> None:
    from sonar.inference_pipelines.text import TextToEmbeddingModelPipeline
    from sonar.models.blaser.loader import load_blaser_model

    rows = pd.read_parquet(folder / "rows.parquet")
    codes = json.loads((folder / "codes.json").read_text())
    blaser_ref = load_blaser_model("tiny_blaser_ref").eval()
    blaser_qe = load_blaser_model("tiny_blaser_qe").eval()
    text_embedder = TextToEmbeddingModelPipeline(
        encoder="tiny_sonar_encoder", tokenizer="tiny_sonar_encoder"
    )
    scores: dict[str, list[float]] = {"blaser": [0.0] * len(rows), "blaser_qe": [0.0] * len(rows)}
    for (src_lang, tgt_lang), direction in rows.groupby(["src_lang", "tgt_lang"], sort=False):
        src_embs = text_embedder.predict(list(direction["src_text"]), source_lang=codes[src_lang])
        ref_embs = text_embedder.predict(list(direction["ref_text"]), source_lang=codes[tgt_lang])
        mt_embs = text_embedder.predict(list(direction["mt_text"]), source_lang=codes[tgt_lang])
        ref = blaser_ref(src=src_embs, ref=ref_embs, mt=mt_embs).squeeze(-1).tolist()
        qe = blaser_qe(src=src_embs, mt=mt_embs).squeeze(-1).tolist()
        for position, row in enumerate(direction.index):
            scores["blaser"][row] = ref[position]
            scores["blaser_qe"][row] = qe[position]
    (folder / "scores.json").write_text(json.dumps(scores))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
