"""Seq2seq translation throughput at NLLB-200's real shapes, by batch size.

Builds M2M100 models with the configurations of `facebook/nllb-200-distilled-600M`,
`-distilled-1.3B` and `nllb-200-3.3B` (random weights, bfloat16, on the GPU), or a tiny one on
the CPU with `--tiny`, and translates the same prompts with `NLLBTranslator.generate_ids`: its
grouping, length-sorted batches, padding and greedy `generate` call, at several `batch_size`
values. The tokenizer is the tests' tiny NLLB tokenizer (tests/tiny_seq2seq.py); its ids are a
small part of the real vocabulary, which changes nothing in the work. Random weights would stop
at an arbitrary step, so the end token is suppressed until `--new-tokens`: every row generates
exactly that many tokens (an upper bound on a real run's work at that output length).

Prints segments/s, generated tokens/s and peak GPU memory per shape and batch size.

    python benchmarks/seq2seq_throughput.py [--tiny] [--segments 512] [--new-tokens 64]
        [--batch-sizes 16,32,64,128,256] [--shapes 600M,1.3B,3.3B] [--output results.json]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from measuring import environment, is_out_of_memory, markdown_table, timed, write_json

from bouquet_eval.translators.hf_seq2seq import NLLBTranslator, nllb_prompt

REPOSITORY = Path(__file__).resolve().parent.parent
# The tiny tokenizer's builder lives with the tests, outside the installed package.
sys.path.insert(0, str(REPOSITORY))
from tests.tiny_seq2seq import build_nllb, pseudo_sentence  # noqa: E402

NLLB: dict[str, Any] = dict(
    vocab_size=256206,
    max_position_embeddings=1024,
    scale_embedding=True,
    activation_function="relu",
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
)
SHAPES = {
    "600M": dict(d_model=1024, layers=12, heads=16, ffn=4096),
    "1.3B": dict(d_model=1024, layers=24, heads=16, ffn=8192),
    "3.3B": dict(d_model=2048, layers=24, heads=16, ffn=8192),
    "tiny": dict(d_model=32, layers=2, heads=4, ffn=64, vocab_size=1024),
}


def random_nllb(shape: dict[str, int], device: str, dtype: str) -> Any:
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    config = M2M100Config(
        d_model=shape["d_model"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
        encoder_attention_heads=shape["heads"],
        decoder_attention_heads=shape["heads"],
        encoder_ffn_dim=shape["ffn"],
        decoder_ffn_dim=shape["ffn"],
        **{**NLLB, "vocab_size": shape.get("vocab_size", NLLB["vocab_size"])},
    )
    with torch.device(device):
        model = M2M100ForConditionalGeneration(config)
    return model.to(getattr(torch, dtype)).eval()


def prompts(count: int, seed: int) -> list[str]:
    """English-to-French prompts of log-normal length around 9 pseudo-words (about 33 tokens
    of the tiny tokenizer, which cuts words finer than NLLB's)."""
    rng = random.Random(seed)
    lengths = [max(1, round(rng.lognormvariate(math.log(9), 0.5))) for _ in range(count)]
    return [nllb_prompt("eng_Latn", "fra_Latn", pseudo_sentence(rng, words)) for words in lengths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU")
    parser.add_argument("--segments", type=int, help="default: 512 (32 with --tiny)")
    parser.add_argument("--new-tokens", type=int, help="default: 64 (16 with --tiny)")
    parser.add_argument("--batch-sizes", help="default: 16,32,64,128,256 (4,16 with --tiny)")
    parser.add_argument("--shapes", default="600M,1.3B,3.3B", help=f"of {list(SHAPES)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="write the numbers here as JSON")
    arguments = parser.parse_args()
    import torch

    device, dtype = ("cpu", "float32") if arguments.tiny else ("cuda", "bfloat16")
    shapes = ["tiny"] if arguments.tiny else arguments.shapes.split(",")
    segments = arguments.segments or (32 if arguments.tiny else 512)
    new_tokens = arguments.new_tokens or (16 if arguments.tiny else 64)
    listed = arguments.batch_sizes or ("4,16" if arguments.tiny else "16,32,64,128,256")
    batch_sizes = [int(value) for value in listed.split(",")]
    setting = environment(device)
    print(setting)

    work = prompts(segments, arguments.seed)
    results: dict[str, dict[str, Any]] = {}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = str(build_nllb(Path(scratch) / "nllb", seed=arguments.seed))

        def translator(model: Any, batch_size: int) -> NLLBTranslator:
            made = NLLBTranslator(
                tokenizer,
                device=device,
                dtype=dtype,
                batch_size=batch_size,
                max_new_tokens=new_tokens,
            )
            made.model = model  # a model in memory rather than a checkpoint to load
            return made

        texts = [prompt.split("\t", 2)[2] for prompt in work]
        lengths = [len(ids) for ids in translator(None, 1).encode(("eng_Latn", "fra_Latn"), texts)]
        for name in shapes:
            torch.manual_seed(arguments.seed)
            model = random_nllb(SHAPES[name], device, dtype)
            # No end token before `new_tokens`: every row does the same, known amount of work.
            model.generation_config.min_new_tokens = new_tokens
            billions = sum(parameter.numel() for parameter in model.parameters()) / 1e9
            translator(model, batch_sizes[0]).generate_ids(work[: batch_sizes[0]])  # warm-up
            for size in batch_sizes:
                key = f"{name} batch {size}"
                results[key] = measure(device, translator(model, size), work)
                results[key]["parameters_billions"] = billions
                print(f"{key}: {results[key]}", flush=True)
                rows.append([f"{name} ({billions:.2f} B)", size, *cells(results[key])])
            del model
            if device == "cuda":
                torch.cuda.empty_cache()
    print(
        f"{segments} prompts, source tokens: median {statistics.median(lengths):.0f}, "
        f"max {max(lengths)}; {new_tokens} tokens generated per prompt, greedy"
    )
    header = ["shape", "batch_size", "segments/s", "generated tokens/s", "peak GiB"]
    print(markdown_table(header, rows))
    write_json(
        arguments.output,
        {
            "environment": setting,
            "dtype": dtype,
            "segments": segments,
            "new_tokens": new_tokens,
            "source_tokens": {"median": statistics.median(lengths), "max": max(lengths)},
            "results": results,
        },
    )


def measure(device: str, translator: NLLBTranslator, work: list[str]) -> dict[str, Any]:
    import torch

    try:
        took, generated = timed(device, lambda: translator.generate_ids(work))
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
        torch.cuda.empty_cache()
        return {"error": "out of memory"}
    # The decoder's start token comes first and is not generated.
    tokens = sum(len(row) - 1 for row in generated)
    return {
        "seconds": took.seconds,
        "segments_per_s": len(work) / took.seconds,
        "generated_tokens_per_s": tokens / took.seconds,
        "generated_tokens": tokens,
        "peak_gib": took.peak_gib,
    }


def cells(result: dict[str, Any]) -> list[str]:
    if "error" in result:
        return ["-", "-", result["error"]]
    peak = "-" if result["peak_gib"] is None else f"{result['peak_gib']:.1f}"
    return [f"{result['segments_per_s']:.1f}", f"{result['generated_tokens_per_s']:.0f}", peak]


if __name__ == "__main__":
    main()
