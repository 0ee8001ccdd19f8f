"""The aggregate job at the benchmark's full scale, against a pyarrow baseline doing the same work.

    .venv/bin/python benchmarks/aggregate_scale.py [--workdir DIR] [--repeats 3]
        [--directions 1062] [--sentences 854] [--metrics chrf metricx glotlid]

Builds (once; kept in `--workdir` for the next run) a model folder in the workflow's layout:
1062 directions x 854 sentences of `<src>-<tgt>.scored.parquet`, written as scoring writes them
(`score_rows`, then `to_parquet`). Texts are made-up words, 10-40 per sentence, each source
sentence distinct; reference and translation pairs are drawn from a pool of 20,000 (a
translation is its reference with 30% of the words replaced), scored once with the real
metrics, so that every row carries true chrF++ (BLEU, TER) scores and statistics. MetricX and
GlotLID columns are random, with sentence-level NaN scattered over 1% of MetricX scores (so
directions have many different numbers of usable sentences) and whole directions without a
GlotLID label.

Then times, in turns (`--repeats` rounds, each in a fresh process with one BLAS thread, as
Snakemake runs the rule, whose peak resident memory is read from /proc), two programs that
write the same outputs:
- the job: `bouquet_eval.results.aggregate.write_aggregates` as the aggregate rule calls it
  (scores.csv, summary.csv, scored_rows.parquet);
- the baseline: plain pyarrow and numpy, written for this comparison. It reads every file into
  one table, groups it by direction with pyarrow's hash group-by, computes the means and the
  bootstrap intervals (the same draws: `Resampling.bootstrap_weights`), the corpus scores from
  summed statistics, and writes the rows; it makes no summary.csv.
It prints the fastest time of each and their ratio (target: the job at most 2x the baseline),
the peak memory (target: under 1.5 GB), and checks the numbers: the job's intervals and corpus
scores equal the baseline's, its means equal within 1e-12 (pyarrow sums in another order), and
corpus scores equal sacreBLEU's `corpus_score` on the texts of a few directions within 1e-9.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sacrebleu.metrics import BLEU, CHRF, TER

from bouquet_eval.core.stats import Resampling, percentile_interval
from bouquet_eval.metrics import (
    CorpusMetric,
    Metric,
    add_composite,
    load_metrics,
    metric_columns,
)
from bouquet_eval.results.aggregate import write_aggregates
from bouquet_eval.scoring.score import score_rows

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
from tests.synthetic import synthetic_directions  # noqa: E402

POOL = 20_000
VOCABULARY = 5_000
REPLACED = 0.3
METRICX_NAN = 0.01
UNLABELLED_TARGETS = 0.03
"""Share of target languages GlotLID has no label for (glotlid_score NaN in every sentence)."""
CHECKED_DIRECTIONS = 3
OUTPUTS = ("scores", "summary", "scored_rows", "resampled")
ENVIRONMENT = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""As Snakemake runs the aggregate rule: its one thread sets these (snakemake/shell.py)."""
SACREBLEU = {"chrfpp": CHRF(word_order=2), "bleu": BLEU(), "ter": TER()}
"""sacreBLEU's own metrics, with its defaults, to check corpus scores against."""


def metrics_of(names: list[str]) -> list[Metric]:
    # The score jobs' settings do not matter here: nothing is scored with MetricX or GlotLID.
    return load_metrics(names, {"glotlid": {"model": "cis-lmu/glotlid/model_v3.bin"}})


def build(folder: Path, arguments: argparse.Namespace) -> list[Path]:
    """The model folder's scored files, made once per set of arguments."""
    directions = synthetic_directions(arguments.directions)
    paths = [folder / f"{direction}.scored.parquet" for direction in directions]
    if all(path.exists() for path in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(VOCABULARY)]
    pool = _scored_pool(
        words, rng, [m for m in metrics_of(arguments.metrics) if isinstance(m, CorpusMetric)]
    )
    generator = np.random.default_rng(0)
    targets = sorted({direction.tgt_lang for direction in directions})
    unlabelled = set(rng.sample(targets, max(1, round(UNLABELLED_TARGETS * len(targets)))))
    n = arguments.sentences
    for number, (direction, path) in enumerate(zip(directions, paths, strict=True), start=1):
        drawn = pool.iloc[generator.integers(len(pool), size=n)].reset_index(drop=True)
        # The columns in the order scoring writes them: translations, scores, statistics.
        columns: dict[str, Any] = {
            "src_lang": direction.src_lang,
            "tgt_lang": direction.tgt_lang,
            "src_text": [_sentence(words, rng) for _ in range(n)],
            "ref_text": drawn["ref_text"],
            "mt_text": drawn["mt_text"],
            "uniq_id": [f"{i}" for i in range(n)],
        }
        columns |= {c: drawn[c] for c in drawn.columns if c not in columns and c[:5] != "stat:"}
        if "metricx" in arguments.metrics:
            columns["metricx"] = generator.uniform(0, 25, size=n)
            columns["metricx"][generator.random(n) < METRICX_NAN] = np.nan
        if "glotlid" in arguments.metrics:
            columns["glotlid_pred"] = direction.tgt_lang
            labelled = direction.tgt_lang not in unlabelled
            columns["glotlid_score"] = generator.beta(8, 1, size=n) if labelled else np.nan
        scored = pd.DataFrame(columns)
        add_composite(scored)
        statistics = drawn[[c for c in drawn.columns if c[:5] == "stat:"]]
        pd.concat([scored, statistics], axis=1).to_parquet(path, index=False)
        if number % 200 == 0:
            print(f"  built {number}/{len(paths)} directions", file=sys.stderr)
    size = sum(path.stat().st_size for path in paths) / 2**20
    print(f"built {len(paths)} scored files ({size:.0f} MiB) in {time.monotonic() - started:.0f} s")
    return paths


def _sentence(words: list[str], rng: random.Random) -> str:
    return " ".join(rng.choices(words, k=rng.randint(10, 40))) + "."


def _scored_pool(words: list[str], rng: random.Random, metrics: list[CorpusMetric]) -> pd.DataFrame:
    references = [_sentence(words, rng) for _ in range(POOL)]
    translations = [
        " ".join(w if rng.random() > REPLACED else rng.choice(words) for w in text.split())
        for text in references
    ]
    rows = pd.DataFrame({"ref_text": references, "mt_text": translations})
    return score_rows(rows, metrics)


def run_job(paths: list[Path], metrics: list[Metric], output: Path) -> None:
    write_aggregates(paths, metrics, Resampling(), {name: output / NAMES[name] for name in OUTPUTS})


NAMES = {
    "scores": "scores.csv",
    "summary": "summary.csv",
    "scored_rows": "scored_rows.parquet",
    "resampled": "resampled.npz",
}


def run_baseline(paths: list[Path], metrics: list[Metric], output: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    resampling = Resampling()
    tables = [pq.ParquetFile(path).read() for path in paths]
    rows = pa.concat_tables(tables, promote_options="permissive")
    columns = [
        c for c in metric_columns(metrics) if pa.types.is_floating(rows.schema.field(c).type)
    ]
    corpus = [m for m in metrics if isinstance(m, CorpusMetric)]
    statistics = [c for m in corpus for c in m.statistics_columns]
    grouped = rows.group_by(["src_lang", "tgt_lang"], use_threads=False).aggregate(
        [("src_lang", "count")]
        + [(c, "mean") for c in columns]
        + [(c, "list") for c in columns]
        + [(c, "sum") for c in statistics]
    )
    grouped = grouped.sort_by([("src_lang", "ascending"), ("tgt_lang", "ascending")])
    table: dict[str, Any] = {
        "src_lang": grouped["src_lang"].to_pylist(),
        "tgt_lang": grouped["tgt_lang"].to_pylist(),
        "n_sentences": grouped["src_lang_count"].to_numpy(),
    }
    weights: dict[int, np.ndarray] = {}
    for column in columns:
        lists = grouped[f"{column}_list"].combine_chunks()
        values, offsets = lists.flatten().to_numpy(zero_copy_only=False), lists.offsets.to_numpy()
        intervals = []
        for start, end in itertools.pairwise(offsets):
            finite = values[start:end][np.isfinite(values[start:end])]
            if not finite.size:
                intervals.append((np.nan, np.nan))
                continue
            if finite.size not in weights:
                weights[finite.size] = resampling.bootstrap_weights(finite.size)
            intervals.append(percentile_interval(weights[finite.size] @ finite / finite.size))
        table[column] = grouped[f"{column}_mean"].to_numpy(zero_copy_only=False)
        table[f"{column}_ci_low"] = [low for low, _ in intervals]
        table[f"{column}_ci_high"] = [high for _, high in intervals]
    for metric in corpus:
        sums = [grouped[f"{c}_sum"].to_pylist() for c in metric.statistics_columns]
        totals = zip(*sums, strict=True)
        table[f"{metric.corpus_column}_corpus"] = [metric.corpus_score(list(t)) for t in totals]
    pd.DataFrame(table).to_csv(output / NAMES["scores"], index=False)
    pq.write_table(rows.drop_columns(statistics), output / NAMES["scored_rows"])


PROGRAMS = {"job": run_job, "baseline": run_baseline}


def child(arguments: argparse.Namespace) -> None:
    """One timed run in this fresh process; prints seconds and peak memory as JSON."""
    paths = build(Path(arguments.workdir) / "model", arguments)
    metrics = metrics_of(arguments.metrics)
    output = Path(arguments.output)
    started, cpu_started = time.perf_counter(), time.process_time()
    PROGRAMS[arguments.child](paths, metrics, output)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_bytes": peak_resident_bytes()}))


def peak_resident_bytes() -> int:
    """This process's peak resident memory. Not getrusage's ru_maxrss, which a process started
    by another inherits from it across fork and exec."""
    status = Path("/proc/self/status").read_text(encoding="ascii")
    (line,) = (line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def check(paths: list[Path], metrics: list[Metric], job: Path, baseline: Path) -> None:
    ours = pd.read_csv(job / NAMES["scores"])
    theirs = pd.read_csv(baseline / NAMES["scores"])
    assert list(ours.columns) == list(theirs.columns), (ours.columns, theirs.columns)
    means = [c for c in ours.columns[3:] if not c.endswith(("_ci_low", "_ci_high", "_corpus"))]
    exact = [c for c in ours.columns if c not in means]
    pd.testing.assert_frame_equal(ours[exact], theirs[exact], check_exact=True)
    largest = max(float(np.nanmax(np.abs(ours[c] - theirs[c]))) for c in means)
    assert largest <= 1e-12, largest
    print(f"job = baseline: {len(ours)} directions; intervals and corpus scores identical, "
          f"means within {largest:.1e}")  # fmt: skip
    worst = 0.0
    for path in paths[:: max(1, len(paths) // CHECKED_DIRECTIONS)][:CHECKED_DIRECTIONS]:
        rows = pd.read_parquet(path, columns=["src_lang", "tgt_lang", "mt_text", "ref_text"])
        line = ours.set_index(["src_lang", "tgt_lang"]).loc[tuple(rows.iloc[0, :2])]
        for column, sacrebleu_metric in SACREBLEU.items():
            if f"{column}_corpus" in line:
                reference = sacrebleu_metric.corpus_score(
                    rows["mt_text"].tolist(), [rows["ref_text"].tolist()]
                ).score
                worst = max(worst, abs(line[f"{column}_corpus"] - reference))
    assert worst <= 1e-9, worst
    print(f"corpus scores = sacreBLEU corpus_score on {CHECKED_DIRECTIONS} directions, "
          f"within {worst:.1e}")  # fmt: skip
    rows = pd.read_parquet(job / NAMES["scored_rows"], columns=["src_lang"])
    assert len(rows) == len(paths) * len(pd.read_parquet(paths[0], columns=["src_lang"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "aggregate_scale"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--metrics", nargs="+", default=["chrf", "metricx", "glotlid"])
    parser.add_argument("--child", choices=sorted(PROGRAMS), help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        child(arguments)
        return
    workdir = Path(arguments.workdir)
    paths = build(workdir / "model", arguments)
    forwarded = [f"--workdir={workdir}", f"--directions={arguments.directions}",
                 f"--sentences={arguments.sentences}", "--metrics", *arguments.metrics]  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {name: [] for name in PROGRAMS}
    for _ in range(arguments.repeats):
        for name in PROGRAMS:
            output = workdir / f"out-{name}"
            output.mkdir(exist_ok=True)
            command = [sys.executable, __file__, f"--child={name}", f"--output={output}"]
            finished = subprocess.run(
                [*command, *forwarded], check=True, capture_output=True, text=True, env=ENVIRONMENT
            )
            results[name].append(json.loads(finished.stdout.splitlines()[-1]))
    metrics = metrics_of(arguments.metrics)
    check(paths, metrics, workdir / "out-job", workdir / "out-baseline")
    fastest = {name: min(run["seconds"] for run in runs) for name, runs in results.items()}
    cpu = {name: min(run["cpu_seconds"] for run in runs) for name, runs in results.items()}
    peak = {name: max(run["peak_bytes"] for run in runs) / 2**30 for name, runs in results.items()}
    print(f"{len(paths)} directions x {arguments.sentences} sentences, metrics "
          f"{' '.join(arguments.metrics)}; fastest of {arguments.repeats}:")  # fmt: skip
    for name in PROGRAMS:
        timing = f"{fastest[name]:6.2f} s ({cpu[name]:6.2f} CPU-s)"
        print(f"  {name:8} {timing}   peak {peak[name]:.2f} GiB")
    ratio = fastest["job"] / fastest["baseline"]
    verdict = "met" if ratio <= 2 and peak["job"] < 1.5 else "NOT met"
    print(f"job / baseline = {ratio:.2f} ({cpu['job'] / cpu['baseline']:.2f} in CPU time; "
          f"target <= 2 and peak < 1.5 GiB: {verdict})")  # fmt: skip


if __name__ == "__main__":
    main()
