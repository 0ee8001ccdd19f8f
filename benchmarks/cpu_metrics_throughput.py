"""Segments per second of the CPU metrics, chrF++ and GlotLID, on one core.

Run on demand (not a test); it needs fastText (fasttext-numpy2-wheel) besides the project:

    python benchmarks/cpu_metrics_throughput.py [--segments 20000] [--repeats 3] [--model PATH]

Prints each metric's segments per CPU-second and what that makes for the benchmark's 0.9 M
segments, alone and together, against the target of 10 CPU-minutes for both.

The real GlotLID cannot be fetched offline, so a stand-in of the same shape is trained first
(about 20 s on 2 cores; 1.1 GB, kept at `--model PATH` for the next run when given):

| | GlotLID v3 | stand-in |
|---|---|---|
| labels | 2102 | 2102 made-up languages in 11 scripts |
| dim, bucket, minn-maxn, word n-grams, loss | 256, 1,000,000, 2-5, 1, softmax | the same |
| vocabulary | 634,361 words | the words of 8 training lines per language (~150,000) |

What a sentence costs depends on that shape (rows read per subword, size of the output matrix),
not on what the weights learned. The real model's larger vocabulary makes its input matrix
1.6 GB instead of 1.1 GB, read in the same way.

Segments are BOUQuET-like: 10-40 words, in 27 target languages and 11 scripts (`TARGET_SCRIPTS`),
with words drawn Zipf-like from 3,000 per language; the translation is the reference with 30%
of its words replaced. GlotLID caches per-word vectors, so its speed depends on how
often words repeat: the share of distinct words is printed, to compare with real data. Times
are CPU times of this process, pinned to one core with single-threaded BLAS (the script
restarts itself to set that up). GlotLID's one-off model load is shown apart, and fastText's own
`predict(text, k=-1)`, the reference GlotLID reproduces, is timed for comparison.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from bouquet_eval.metrics import load_metric

REPOSITORY = Path(__file__).resolve().parent.parent
BENCHMARK_SEGMENTS = 900_000
TARGET_MINUTES = 10.0
LABELS = 2102
WORDS_PER_LANGUAGE = 3000
REPLACED = 0.3
SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
TARGET_SCRIPTS = {"Latn": 12, "Cyrl": 3, "Arab": 3, "Deva": 2} | {
    script: 1 for script in ("Ethi", "Grek", "Hebr", "Geor", "Hang", "Hani", "Thai")
}
"""Target languages per script: Latin-heavy like BOUQuET, two of 27 written without spaces."""
ZIPF = list(itertools.accumulate(1 / rank for rank in range(1, WORDS_PER_LANGUAGE + 1)))
"""Cumulative weights: the n-th word of a language is drawn in proportion to 1/n."""


def load_tiny_fasttext() -> ModuleType:
    """tests/tiny_fasttext.py, which is not part of the installed package."""
    path = REPOSITORY / "tests" / "tiny_fasttext.py"
    spec = importlib.util.spec_from_file_location("tiny_fasttext", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def build_model(path: Path, languages: Sequence[Any], builder: ModuleType) -> None:
    lines = builder.training_lines(languages, lines_per_language=8)
    threads = len(os.sched_getaffinity(0))
    builder.train_model(path, lines, dim=256, bucket=1_000_000, epoch=1, threads=threads)


def segments(languages: Sequence[Any], count: int, seed: int = 0) -> pd.DataFrame:
    """Rows with a reference and a translation that differs from it in some words."""
    rng = random.Random(seed)
    by_script: dict[str, list[Any]] = {}
    for language in languages:
        by_script.setdefault(language.script, []).append(language)
    targets = [
        language
        for script, count in TARGET_SCRIPTS.items()
        for language in by_script[script][:count]
    ]
    records = []
    for position in range(count):
        language = targets[position % len(targets)]
        words = rng.choices(language.words, cum_weights=ZIPF, k=rng.randint(10, 40))
        translation = [
            rng.choices(language.words, cum_weights=ZIPF)[0] if rng.random() < REPLACED else word
            for word in words
        ]
        records.append(
            {
                "src_lang": "eng_Latn",
                "tgt_lang": language.label,
                "src_text": "",
                "ref_text": language.joiner.join(words),
                "mt_text": language.joiner.join(translation),
            }
        )
    return pd.DataFrame.from_records(records)


def distinct_share(rows: pd.DataFrame) -> float:
    """Distinct (language, token) pairs per token in the translations, as GlotLID splits them."""
    tokens = [
        (language, token)
        for language, text in zip(rows["tgt_lang"], rows["mt_text"], strict=True)
        for token in text.split()
    ]
    return len(set(tokens)) / len(tokens)


def cpu_seconds(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def time_chrf(rows: pd.DataFrame, repeats: int) -> float:
    metric = load_metric("chrf")
    return statistics.median(cpu_seconds(lambda: metric.score(rows)) for _ in range(repeats))


def time_glotlid(model: Path, rows: pd.DataFrame, repeats: int) -> tuple[float, float]:
    """Median CPU seconds to load the model, and to score `rows` with a fresh word cache."""
    loads, scores = [], []
    for _ in range(repeats):
        metric = load_metric("glotlid", {"model": str(model)})
        loads.append(cpu_seconds(functools.partial(metric.score, rows.iloc[:1])))
        scores.append(cpu_seconds(functools.partial(metric.score, rows)))
        del metric  # one 1.1 GB model in memory at a time
    return statistics.median(loads), statistics.median(scores)


def time_fasttext_predict(model: Path, rows: pd.DataFrame) -> float:
    import fasttext

    classifier = fasttext.load_model(str(model))
    texts = rows["mt_text"].tolist()
    return cpu_seconds(lambda: [classifier.predict(text, k=-1, threshold=0.0) for text in texts])


def report(name: str, count: int, seconds: float, note: str = "") -> float:
    rate = count / seconds
    minutes = BENCHMARK_SEGMENTS / rate / 60
    print(f"{name:<26} {rate:>9,.0f} seg/s  {minutes:>6.1f} CPU-min for 0.9 M{note}")
    return minutes


def restart_single_threaded() -> None:
    """Re-execute with BLAS limited to one thread: it reads that setting when numpy loads."""
    if any(os.environ.get(name) != value for name, value in SINGLE_THREAD.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **SINGLE_THREAD})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--predict-segments", type=int, default=1000)
    parser.add_argument("--model", type=Path, help="where to keep the stand-in model")
    arguments = parser.parse_args()
    restart_single_threaded()

    builder = load_tiny_fasttext()
    languages = builder.synthetic_languages(LABELS, words_per_language=WORDS_PER_LANGUAGE)
    with tempfile.TemporaryDirectory() as scratch:
        model = arguments.model or Path(scratch) / "model.bin"
        if not model.exists():
            started = time.monotonic()
            build_model(model, languages, builder)
            print(f"stand-in model trained in {time.monotonic() - started:.0f} s: {model}")
        # Training used every core; the measurements use one.
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        rows = segments(languages, arguments.segments)
        words = rows["mt_text"].str.split().str.len()
        print(
            f"{len(rows):,} segments, {rows['tgt_lang'].nunique()} target languages, "
            f"{rows['mt_text'].str.len().mean():.0f} characters and {words.mean():.1f} "
            f"space-separated tokens on average, {distinct_share(rows):.1%} of tokens distinct"
        )
        chrf = report("chrF++", len(rows), time_chrf(rows, arguments.repeats))
        load, scoring = time_glotlid(model, rows, arguments.repeats)
        glotlid = report("GlotLID", len(rows), scoring, f" (+ {load:.1f} s model load per job)")
        sample = rows.iloc[: arguments.predict_segments]
        report("fastText predict(k=-1)", len(sample), time_fasttext_predict(model, sample))
    total = chrf + glotlid
    verdict = "within" if total <= TARGET_MINUTES else "OVER"
    print(
        f"chrF++ and GlotLID: {total:.1f} CPU-min for 0.9 M, {verdict} the target of "
        f"{TARGET_MINUTES:.0f}"
    )


if __name__ == "__main__":
    main()
