"""The meta-evaluation's statistics (correlations.csv) at BOUQuET's shape, against the former loops.

    .venv/bin/python benchmarks/metaeval_scale.py [--directions 1062] [--segments 100]
        [--systems 4] [--metrics 3] [--subset 4] [--resamples 1000] [--trials 1000]
        [--workers 2]

A synthetic table of judgements: every direction has `--segments` judged source segments, each
translated by every one of `--systems` systems (so 1062 x 100 x 4 = 424,800 judged
translations by default), human scores on a 1-5 scale with ties, and `--metrics` metrics of
graded quality. `results.correlations.correlations` runs with the default statistics (1000
bootstrap resamples, 1000 permutation trials, decided by acc-eq): every direction, then the
three pools (all, into and out of English), as the metaeval job does.

Side by side on `--subset` directions (and their pools), the same function as it was before
the statistics were computed for all resamples at once (one resample, one trial at a time; its
two modules taken from git history at 553779a): the times, their ratio, and the largest
difference between the two correlations.csv tables. Then the full shape with the current code,
with `--workers` threads (the metaeval job's two by default): wall and CPU time, and the
process's peak memory.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPOSITORY / "scripts")]

from bouquet_eval.results.correlations import Settings, correlations  # noqa: E402

BEFORE = "553779a"
LANGUAGES = ["fra_Latn", "deu_Latn", "arb_Arab", "hin_Deva", "zho_Hans", "swh_Latn", "yor_Latn"]


def judgements(directions: int, segments: int, systems: int, metrics: int, seed: int = 1):
    """The table (checked columns) and each metric's scores, higher meaning better."""
    rng = np.random.default_rng(seed)
    names = []
    for number in range(directions):
        other = f"{LANGUAGES[number % len(LANGUAGES)][:3]}{number:04d}_Latn"
        names.append(("eng_Latn", other) if number % 2 else (other, "eng_Latn"))
    rows = directions * segments * systems
    direction = np.repeat(np.arange(directions), segments * systems)
    quality = np.tile(np.arange(systems), directions * segments)
    human = np.clip(5 - quality * 4 / systems + rng.integers(-1, 2, rows), 1, 5).astype(float)
    table = pd.DataFrame(
        {
            "src_lang": [names[d][0] for d in direction],
            "tgt_lang": [names[d][1] for d in direction],
            "system": [f"system-{q}" for q in quality],
            "human": human,
            "segment": np.tile(np.repeat(np.arange(segments), systems), directions).astype(str),
        }
    )
    scores = {f"metric-{m}": human + rng.normal(scale=0.8 + m, size=rows) for m in range(metrics)}
    return table, scores


def former_correlations() -> types.ModuleType:
    """results.correlations as it was at BEFORE, with its results.agreement of then."""
    folder = Path(tempfile.mkdtemp(prefix="metaeval-before-"))
    for name in ("agreement", "correlations"):
        source = subprocess.run(
            ["git", "show", f"{BEFORE}:scripts/bouquet_eval/results/{name}.py"],
            cwd=REPOSITORY,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        source = source.replace("bouquet_eval.results.agreement", "before_agreement")
        (folder / f"before_{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    import before_correlations  # type: ignore[import-not-found]

    return before_correlations


def timed(function, *arguments):
    start = time.perf_counter()
    result = function(*arguments)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--metrics", type=int, default=3)
    parser.add_argument("--subset", type=int, default=4)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    arguments = parser.parse_args()
    settings = Settings(
        bootstrap_resamples=arguments.resamples, permutation_trials=arguments.trials
    )
    print(f"settings: {settings.signature()}")

    table, scores = judgements(
        arguments.subset, arguments.segments, arguments.systems, arguments.metrics
    )
    before = former_correlations()
    old_seconds, old = timed(before.correlations, table, scores, before.Settings(**vars(settings)))
    new_seconds, new = timed(correlations, table, scores, settings)
    # The columns both have (acc_eq_pooled came later). On this complete table, where every item
    # has every system, acc-eq averaged by item equals the pooled one the former code computed;
    # acc_eq_epsilon may differ where several epsilons give that accuracy (now MTME's choice).
    numbers = [column for column in new.select_dtypes("number").columns if column in old]
    difference = (new[numbers] - old[numbers]).abs().max().max()
    same_flags = (new["best"] == old["best"]).all() and (
        new["best_significantly_better"].fillna(False)
        == old["best_significantly_better"].fillna(False)
    ).all()
    print(
        f"subset: {arguments.subset} directions x {arguments.segments} segments x "
        f"{arguments.systems} systems = {len(table)} judged translations, "
        f"{arguments.metrics} metrics, {len(new)} rows of correlations.csv"
    )
    print(f"  before (one resample, one trial at a time): {old_seconds:8.1f} s")
    print(f"  now (all at once):                          {new_seconds:8.1f} s")
    print(f"  ratio: {old_seconds / new_seconds:.1f}x faster")
    print(
        f"  largest difference between the tables: {difference:.2e}; same decisions: {same_flags}"
    )

    table, scores = judgements(
        arguments.directions, arguments.segments, arguments.systems, arguments.metrics
    )
    cpu = time.process_time()
    full_seconds, full = timed(
        lambda: correlations(table, scores, settings, workers=arguments.workers)
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"full shape: {arguments.directions} directions, {len(table)} judged translations, "
        f"{arguments.metrics} metrics, {len(full)} rows, {arguments.workers} workers: "
        f"{full_seconds:.1f} s wall, {time.process_time() - cpu:.1f} CPU-s, "
        f"peak {peak:.2f} GiB (the process)"
    )
    per_direction = new_seconds / (len(new) // arguments.metrics)
    print(
        f"  the former code, from the subset's time per scope: about "
        f"{old_seconds / new_seconds * full_seconds / 3600:.1f} h"
        f" (subset {per_direction:.2f} s per scope now)"
    )


if __name__ == "__main__":
    main()
