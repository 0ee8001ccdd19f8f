"""BLASER 2.0 on a GPU: segments per second of the project's scoring against sonar-space's own
README pipeline, on the same segments, in one run.

    python benchmarks/blaser_gpu.py [--languages 8] [--sentences 480]
        [--batch-sizes 32,64,128] [--dtype bfloat16] [--output blaser.json]
    python benchmarks/blaser_gpu.py --tiny --languages 2 --sentences 24 --batch-sizes 8
        # every step on the CPU with tiny sizes: a smoke test

Needs the BLASER environment (.venv-blaser: sonar-space, fairseq2, torch 2.9.1). Builds the
SONAR text encoder and both BLASER models of the released shapes with random weights (24
layers of 1024, a vocabulary of 256,206: about 3 GB) with tests/blaser_checkpoints.py; the
tokenizer is the tests' small SentencePiece model, which cuts sentences into more pieces than
SONAR's own (the mean per sentence is printed).

One job's work at BOUQuET's shape: `--languages` languages each paired with English both ways,
each direction the bundled sample's sentence pairs (one text per language: a language's
sentences are the sources of its direction out and the references of its direction in), with
translations of their own. Plans, every one scoring both forms:

- sonar-space's README pipeline per direction: its `TextToEmbeddingModelPipeline` (batches
  of `--batch-sizes`' first) called on the sources, references and translations, then each
  BLASER model (what a job would do without the project's economy);
- the project's `Blaser.score` and `BlaserQE.score` per direction, as a score job calls them
  (one encoder for both forms, each distinct source and reference embedded once, one encoder
  call per language and direction), at each batch size, in a job of its own.

Each prints and records seconds, segments per second, sentences embedded and peak memory, and
the largest difference of its scores from the README pipeline's. Results belong in
benchmarks/gpu_results.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
from measuring import environment, markdown_table, plan_record, timed, write_json  # noqa: E402

from bouquet_eval.metrics.blaser import _EMBEDDINGS, Blaser, BlaserQE, model_config  # noqa: E402
from tests.blaser_checkpoints import build_all  # noqa: E402
from tests.comet_reference import sample_pairs  # noqa: E402

PARTNERS = ("fra_Latn", "deu_Latn", "spa_Latn", "rus_Cyrl", "hin_Deva", "arb_Arab", "zho_Hans",
            "por_Latn", "jpn_Jpan", "swh_Latn", "tur_Latn", "vie_Latn")  # fmt: skip


def job_rows(languages: int, sentences: int) -> list[Any]:
    """The rows of each direction of one job: English with each of `languages` partners, both
    ways; a partner's text is the sample's, marked with the partner's code."""
    pairs = sample_pairs().head(sentences)
    english = list(pairs["src_text"])
    directions = []
    for partner in PARTNERS[:languages]:
        theirs = [f"{text} [{partner}]" for text in pairs["ref_text"]]
        for src_lang, tgt_lang, sources, references in (
            ("eng_Latn", partner, english, theirs),
            (partner, "eng_Latn", theirs, english),
        ):
            rows = pairs.head(0).reindex(range(len(pairs)))
            rows["src_lang"], rows["tgt_lang"] = src_lang, tgt_lang
            rows["src_text"], rows["ref_text"] = sources, references
            rows["mt_text"] = [f"{text} <{src_lang}-{tgt_lang}>" for text in pairs["mt_text"]]
            directions.append(rows)
    return directions


def readme_pipeline(models: dict[str, Path], device: str, dtype: str, batch: int) -> Any:
    """A function scoring a direction's rows as sonar-space's README does, models loaded once."""
    import torch
    from fairseq2.assets import AssetCard, get_asset_store
    from fairseq2.data.tokenizers import load_tokenizer
    from fairseq2.models import load_model
    from sonar.inference_pipelines.text import TextToEmbeddingModelPipeline

    store = get_asset_store()
    cards = {
        name: AssetCard(
            f"benchmark_{name}",
            {"checkpoint": (models[name] / "model.pt").as_uri(), **model_config(models[name])},
            store.retrieve_card(card),
        )
        for name, card in (("blaser", "blaser_2_0_ref"), ("blaser_qe", "blaser_2_0_qe"))
    }
    blaser_ref, blaser_qe = (
        load_model(cards[name], device=torch.device(device)).eval() for name in cards
    )
    encoder = models["encoder"]
    card = AssetCard(
        "benchmark_encoder",
        {
            "checkpoint": (encoder / "sonar_text_encoder.pt").as_uri(),
            "tokenizer": (encoder / "sentencepiece.source.256000.model").as_uri(),
            **model_config(encoder),
        },
        store.retrieve_card("text_sonar_basic_encoder"),
    )
    on = {"device": torch.device(device), "dtype": getattr(torch, dtype)}
    tokenizer = load_tokenizer(card)
    text_embedder = TextToEmbeddingModelPipeline(load_model(card, **on), tokenizer, **on)
    embedded = [0]

    def score(rows: Any) -> dict[str, list[float]]:
        embeddings = {}
        for role, lang in (("src", "src_lang"), ("ref", "tgt_lang"), ("mt", "tgt_lang")):
            embeddings[role] = text_embedder.predict(
                list(rows[f"{role}_text"]), source_lang=rows[lang].iloc[0], batch_size=batch
            ).float()
            embedded[0] += len(rows)
        with torch.inference_mode():
            ref = blaser_ref(src=embeddings["src"], ref=embeddings["ref"], mt=embeddings["mt"])
            qe = blaser_qe(src=embeddings["src"], mt=embeddings["mt"])
        return {"blaser": ref.squeeze(-1).tolist(), "blaser_qe": qe.squeeze(-1).tolist()}

    to_pieces = tokenizer.create_encoder(lang="eng_Latn")
    english = list(sample_pairs()["src_text"])
    pieces = sum(len(to_pieces(text)) for text in english) / len(english)
    return score, embedded, pieces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", type=int, default=8)
    parser.add_argument("--sentences", type=int, default=480)
    parser.add_argument("--batch-sizes", default="32,64,128")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--tiny", action="store_true", help="tiny models on the CPU")
    parser.add_argument("--output", type=Path)
    arguments = parser.parse_args()
    device = "cpu" if arguments.tiny else "cuda"
    dtype = "float32" if arguments.tiny else arguments.dtype
    batches = [int(size) for size in arguments.batch_sizes.split(",")]
    directions = job_rows(arguments.languages, arguments.sentences)
    segments = sum(len(rows) for rows in directions)
    plans = []
    with tempfile.TemporaryDirectory() as folder:
        models = build_all(Path(folder), released=not arguments.tiny)
        print(f"{len(directions)} directions, {segments} segments, on {device} in {dtype}")
        score, embedded, pieces = readme_pipeline(models, device, dtype, batches[0])
        print(f"{pieces:.1f} pieces per English sentence of the sample")
        score(directions[0].head(8))  # warm-up: kernels, allocator
        embedded[0] = 0
        took, readme = timed(device, lambda: [score(rows) for rows in directions])
        reference = {n: [v for part in readme for v in part[n]] for n in ("blaser", "blaser_qe")}
        plans.append(
            plan_record(
                f"README pipeline, batch {batches[0]}",
                took,
                segments,
                embedded=embedded[0],
                max_difference=None,
            )
        )
        for batch in batches:
            _EMBEDDINGS.clear()  # a job of its own: its encoder loaded anew, nothing embedded
            ours = [
                form(
                    encoder=str(models["encoder"]),
                    checkpoint=str(models[form.name]),
                    batch_size=batch,
                    device=device,
                    dtype=dtype,
                )
                for form in (Blaser, BlaserQE)
            ]
            for metric in ours:
                metric.load()
            ours[0].embeddings().pipeline()
            took, scored = timed(device, partial(score_all, ours, directions))
            largest = max(
                abs(value - expected)
                for index, metric in enumerate(ours)
                for value, expected in zip(
                    [v for part in scored for v in part[index][metric.name]],
                    reference[metric.name],
                    strict=True,
                )
            )
            embedded_sentences = ours[0].embeddings().embedded
            plans.append(
                plan_record(
                    f"ours, batch {batch}",
                    took,
                    segments,
                    embedded=embedded_sentences,
                    max_difference=largest,
                )
            )
        print(markdown_table(
            ["plan", "seconds", "segments/s", "sentences embedded", "peak GiB", "max |diff|"],
            [[p["plan"], f"{p['seconds']:.2f}", f"{p['segments_per_s']:.1f}", p["embedded"],
              p["peak_gib"], p["max_difference"]] for p in plans],
        ))  # fmt: skip
    write_json(
        arguments.output,
        {"environment": environment(device), "pieces_per_sentence": pieces, "plans": plans},
    )


def score_all(metrics: list[Blaser], directions: list[Any]) -> list[list[Any]]:
    return [[metric.score(rows) for metric in metrics] for rows in directions]


if __name__ == "__main__":
    main()
