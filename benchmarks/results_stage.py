"""The results stage whole at BOUQuET's shape: every model's own share of it and the leaderboard
job, against a vectorised program computing the same numbers (checked equal), and adding a
model against building every model's from scratch.

    .venv/bin/python benchmarks/results_stage.py [--workdir DIR] [--directions 1062]
        [--sentences 854] [--models 5]

Builds (once, kept in `--workdir`; results_scale.py's layout) an output folder of `--models` + 1
models, each a scored_rows.parquet of 1062 directions x 854 sentences with chrF++ and MetricX
(tests/synthetic.py). Then, each in a fresh process with one BLAS thread, as Snakemake runs a
job, timing its CPU (and wall) seconds:
- each model's own share, once per model: the aggregation's statistics from its rows
  (scores.csv: per direction the means and 95% bootstrap intervals of each score column;
  summary.csv: the macro means and intervals of its groups; resampled.npz), its report
  extract (`extracts.ExtractBuilder` handed its rows a direction at a time, as the aggregate
  job hands it the rows it writes into scored_rows.parquet: reading them, which that job does
  to write the file, is not counted), and its heatmaps job (its two heatmaps, from scores.csv);
- the leaderboard job of the first `--models` models and of all of them: leaderboard.csv and
  .md, and every page and figure of the report;
- the baseline: one numpy/pyarrow program that reads the same scored_rows.parquet files (their
  keys and scores only) and computes the same numbers, each model's resample means as one
  count-matrix product: per model and direction the means and intervals of each column (the
  same draws), per model summary.csv's macro means and intervals, the leaderboard's macro
  means and intervals, p-values against the best and clusters, and the report's per-direction
  paired tests of each model against its baseline (the last model) with Benjamini-Hochberg.
Every number of the baseline is checked against the stage's files, to 1e-9. Prints the stage's
and the baseline's CPU time and their ratio (target: at most 3x), and adding a model (its own
share and the leaderboard job of one model more) against building from scratch the models
there were and all of them (target: at most 0.2).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from measuring import child_json

REPOSITORY = Path(__file__).resolve().parent.parent
# This checkout's package and tests, whatever the environment has installed.
sys.path[:0] = [str(REPOSITORY / "scripts"), str(REPOSITORY)]

COLUMNS = ["chrfpp", "metricx"]
LOWER = {"metricx"}
KEYS = ["src_lang", "tgt_lang", "uniq_id"]
ONE_THREAD = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""As Snakemake runs a job of one thread."""
TOLERANCE = 1e-9


def names(count: int) -> list[str]:
    return [f"model-{number + 1}" for number in range(count)]


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(started: tuple[float, float]) -> dict[str, float]:
    wall, cpu = clock()
    return {"wall_s": wall - started[0], "cpu_s": cpu - started[1]}


def child_own(output: Path, model: str) -> dict[str, Any]:
    """A model's own share: its statistics, its extract and its heatmaps, into its folder."""
    import pandas as pd
    import pyarrow.parquet as pq

    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.aggregate import direction_values, score_table, summary
    from bouquet_eval.results.extracts import EXTRACT_FILE, ExtractBuilder
    from bouquet_eval.results.figures import write_heatmaps

    folder = output / model
    scored = folder / "scored_rows.parquet"
    measured = {}
    # The rows as the aggregation holds them, a direction at a time (not timed: it reads them
    # from the scored files to write scored_rows.parquet).
    whole = pq.read_table(scored)
    sources = whole.column("src_lang").to_numpy(zero_copy_only=False)
    targets = whole.column("tgt_lang").to_numpy(zero_copy_only=False)
    edges = np.flatnonzero((sources[1:] != sources[:-1]) | (targets[1:] != targets[:-1])) + 1
    bounds = [0, *edges.tolist(), whole.num_rows]
    directions = [whole.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    # As `aggregate.write_aggregates` makes them of the directions it reads.
    started = clock()
    values = [direction_values(part, COLUMNS, [], str(n)) for n, part in enumerate(directions)]
    table = score_table(values, COLUMNS, set(), Resampling())
    table.scores.to_csv(folder / "scores.csv", index=False)
    summary(table).to_csv(folder / "summary.csv", index=False)
    table.resampled.write(folder / "resampled.npz")
    measured["statistics"] = since(started)
    started = clock()
    builder = ExtractBuilder(whole.num_rows, whole.column_names, COLUMNS, LOWER)
    for direction in directions:
        builder.add(direction)
    builder.extract().write(folder / EXTRACT_FILE)
    measured["extract"] = since(started)
    started = clock()
    scores = pd.read_csv(folder / "scores.csv")
    write_heatmaps({c: folder / f"heatmap.{c}.svg" for c in COLUMNS}, scores, model, LOWER)
    measured["heatmaps"] = since(started)
    return measured


def child_leaderboard(output: Path, count: int, target: Path) -> dict[str, Any]:
    """The leaderboard job of the first `count` models: the leaderboard and every page
    (results_scale.py's, the last model as the results page's baseline)."""
    from results_scale import leaderboard_job, report_pages

    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.compare import versus_baseline
    from bouquet_eval.results.report import LazyRows

    models = names(count)
    started = clock()
    results, board = leaderboard_job(output, models, target)
    report_pages(output, models, target, results, board)
    measured = since(started)
    # What the results page compares, for the check against the baseline (not timed).
    resampling = Resampling()
    statistics = {r.name: r.statistics(COLUMNS, resampling) for r in results}
    by_name = {r.name: r for r in results}
    versus = versus_baseline(board, LazyRows(by_name), statistics, models[-1], resampling)
    assert versus is not None
    versus.to_csv(target / "versus.csv", index=False)
    return measured


def child_baseline(output: Path, count: int, target: Path) -> dict[str, Any]:
    """The same numbers, vectorised: see the module docstring."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from results_scale import p_values

    from bouquet_eval.core.stats import Resampling, benjamini_hochberg

    resampling = Resampling()
    models = names(count)
    started = clock()

    def percentiles(resamples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ordered = np.sort(resamples, axis=-1)
        lower = resamples.shape[-1] // 40
        return ordered[..., lower], ordered[..., resamples.shape[-1] - lower - 1]

    numbers: dict[str, np.ndarray] = {}
    means, resamples = {}, {}
    for model in models:
        table = pq.read_table(output / model / "scored_rows.parquet", columns=[*KEYS, *COLUMNS])
        order = pc.sort_indices(
            table, sort_keys=[("src_lang", "ascending"), ("tgt_lang", "ascending")]
        )
        table = table.take(order)
        sources = table.column("src_lang").to_numpy(zero_copy_only=False)
        targets = table.column("tgt_lang").to_numpy(zero_copy_only=False)
        size = (
            int(np.flatnonzero((sources[1:] != sources[:-1]) | (targets[1:] != targets[:-1]))[0])
            + 1
        )
        directions = table.num_rows // size
        weights = resampling.bootstrap_weights(size)
        for column in COLUMNS:
            values = table[column].to_numpy().reshape(directions, size)
            assert np.isfinite(values).all(), "the baseline takes every sentence as scored"
            means[model, column] = values.mean(axis=1)
            resamples[model, column] = values @ weights.T / size
            numbers[f"{model}:{column}:low"], numbers[f"{model}:{column}:high"] = percentiles(
                resamples[model, column]
            )
            numbers[f"{model}:{column}:mean"] = means[model, column]
        # summary.csv's groups: all, by source, by target, and relative to English.
        keys = sources.reshape(directions, size)[:, 0], targets.reshape(directions, size)[:, 0]
        groups = [np.ones(directions, bool)]
        groups += [keys[0] == code for code in sorted(set(keys[0]))]
        groups += [keys[1] == code for code in sorted(set(keys[1]))]
        into, out_of = keys[1] == "eng_Latn", keys[0] == "eng_Latn"
        groups += [g for g in (into, out_of, ~into & ~out_of) if g.any()]
        member = np.array(groups, dtype=float)
        member /= member.sum(axis=1, keepdims=True)
        for column in COLUMNS:
            macro = member @ resamples[model, column]
            numbers[f"{model}:{column}:summary_mean"] = member @ means[model, column]
            low, high = percentiles(macro)
            numbers[f"{model}:{column}:summary_low"], numbers[f"{model}:{column}:summary_high"] = (
                low,
                high,
            )
    primary = "metricx"
    ranked = sorted(models, key=lambda m: means[m, primary].mean())
    numbers["ranked"] = np.array(ranked)

    def pooled_p(first: str, second: str) -> float:
        deltas = (resamples[second, primary] - resamples[first, primary]).mean(axis=0)
        delta = means[second, primary].mean() - means[first, primary].mean()
        return float(p_values(deltas[None, :], np.array([delta]))[0])

    best = ranked[0]
    head, cluster, p_best, clusters = best, 1, [np.nan], [1]
    for model in ranked[1:]:
        p_best.append(pooled_p(best, model))
        p = p_best[-1] if head == best else pooled_p(head, model)
        if p < 0.05:
            head, cluster = model, cluster + 1
        clusters.append(cluster)
    numbers["p_vs_best"], numbers["cluster"] = np.array(p_best), np.array(clusters)
    baseline = models[-1]
    for model in ranked:  # the report's tests against its baseline, per direction
        if model != baseline:
            deltas = resamples[model, primary] - resamples[baseline, primary]
            observed = means[model, primary] - means[baseline, primary]
            tested = p_values(deltas, observed)
            numbers[f"versus:{model}:p"] = tested
            numbers[f"versus:{model}:bh"] = benjamini_hochberg(tested)
    measured = since(started)
    np.savez(target / "baseline.npz", **numbers)  # type: ignore[arg-type]
    return measured


def checked(output: Path, count: int, target: Path) -> float:
    """The largest difference between the baseline's numbers and the stage's files."""
    import pandas as pd

    numbers = np.load(target / "baseline.npz")
    largest = 0.0

    def compare(ours: Any, theirs: Any, what: str) -> None:
        nonlocal largest
        first, second = (
            np.atleast_1d(np.asarray(ours, float)),
            np.atleast_1d(np.asarray(theirs, float)),
        )
        assert first.shape == second.shape, f"{what}: {first.shape} against {second.shape}"
        assert (np.isnan(first) == np.isnan(second)).all(), f"{what}: not the same missing values"
        known = ~np.isnan(first)
        difference = float(np.abs(first[known] - second[known]).max(initial=0.0))
        assert difference <= TOLERANCE, f"{what}: the stage and the baseline differ by {difference}"
        largest = max(largest, difference)

    for model in names(count):
        scores = pd.read_csv(output / model / "scores.csv")
        summary = pd.read_csv(output / model / "summary.csv")
        for column in COLUMNS:
            compare(scores[column], numbers[f"{model}:{column}:mean"], f"{model} {column}")
            for end in ("low", "high"):
                compare(scores[f"{column}_ci_{end}"], numbers[f"{model}:{column}:{end}"], model)
                compare(
                    summary[f"{column}_ci_{end}"],
                    numbers[f"{model}:{column}:summary_{end}"],
                    f"{model} summary {column}",
                )
            compare(summary[column], numbers[f"{model}:{column}:summary_mean"], f"{model} summary")
    board = pd.read_csv(target / "leaderboard.csv")
    assert board["model"].tolist() == numbers["ranked"].tolist(), "the models' order differs"
    compare(board["p_vs_best"], numbers["p_vs_best"], "p against the best")
    compare(board["cluster"], numbers["cluster"], "clusters")
    for model in names(count):
        row = board.loc[board["model"] == model].iloc[0]
        for column in COLUMNS:
            for end in ("low", "high"):  # the macro interval: summary.csv's group of all
                every = numbers[f"{model}:{column}:summary_{end}"][0]
                compare(row[f"{column}_ci_{end}"], every, f"{model} leaderboard interval")
    versus = pd.read_csv(target / "versus.csv")
    for model, tests in versus.groupby("system"):
        compare(tests["p_paired_bootstrap"], numbers[f"versus:{model}:p"], f"{model} tests")
        compare(tests["p_paired_bootstrap_bh"], numbers[f"versus:{model}:bh"], f"{model} BH")
    return largest


def in_child(*arguments: str) -> Any:
    return child_json(__file__, *arguments, env=ONE_THREAD)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        kind, output, *rest = arguments.child
        if kind == "own":
            measured = child_own(Path(output), rest[0])
        elif kind == "leaderboard":
            measured = child_leaderboard(Path(output), int(rest[0]), Path(rest[1]))
        else:
            measured = child_baseline(Path(output), int(rest[0]), Path(rest[1]))
        print(json.dumps(measured))
        return

    from tests.synthetic import bouquet_shaped_directions, write_dataset, write_model_run

    workdir = arguments.workdir or Path(tempfile.mkdtemp(prefix="results-stage-"))
    directions = bouquet_shaped_directions(total=arguments.directions)
    count = arguments.models
    output = workdir / "runs"
    print(f"{len(directions)} directions x {arguments.sentences} sentences, {count} models (+1), "
          f"in {workdir}; load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    if not (workdir / "dataset").exists():
        write_dataset(workdir / "dataset", directions, arguments.sentences)
    for number, model in enumerate(names(count + 1)):
        if not (output / model / "scored_rows.parquet").exists():
            write_model_run(
                output / model, directions, arguments.sentences, shift=-0.5 * number, seed=number
            )
    own = {}
    for model in names(count + 1):
        own[model] = in_child("own", str(output), model)
        parts = ", ".join(f"{part} {m['cpu_s']:.2f}" for part, m in own[model].items())
        print(f"{model}'s own share, CPU-s: {parts}", flush=True)
    share = {m: sum(part["cpu_s"] for part in parts.values()) for m, parts in own.items()}
    with tempfile.TemporaryDirectory() as scratch:
        jobs = {}
        for models in (count, count + 1):
            target = Path(scratch) / f"leaderboard-{models}"
            (target / "report").mkdir(parents=True)
            jobs[models] = in_child("leaderboard", str(output), str(models), str(target))
            print(f"leaderboard job of {models} models: {jobs[models]['cpu_s']:.2f} CPU-s "
                  f"({jobs[models]['wall_s']:.1f} s wall)", flush=True)  # fmt: skip
        target = Path(scratch) / f"leaderboard-{count}"
        baseline = in_child("baseline", str(output), str(count), str(target))
        largest = checked(output, count, target)
    stage = sum(share[m] for m in names(count)) + jobs[count]["cpu_s"]
    ratio = stage / baseline["cpu_s"]
    added = share[names(count + 1)[-1]] + jobs[count + 1]["cpu_s"]
    # Rebuilding all: the models there were, or every model once one is added.
    rebuilt = {count: stage, count + 1: sum(share.values()) + jobs[count + 1]["cpu_s"]}
    print(f"baseline: {baseline['cpu_s']:.2f} CPU-s ({baseline['wall_s']:.1f} s wall); every "
          f"number equal to the stage's within {largest:.1e}")  # fmt: skip
    print(f"the results stage of {count} models: {stage:.2f} CPU-s (own shares "
          f"{sum(share[m] for m in names(count)):.2f}, leaderboard job "
          f"{jobs[count]['cpu_s']:.2f}): {ratio:.2f}x the baseline (target <= 3: "
          f"{'met' if ratio <= 3 else 'NOT met'})")  # fmt: skip
    for models, cost in rebuilt.items():
        print(f"adding model {count + 1}: {added:.2f} CPU-s against {cost:.2f} for building "
              f"{models} models from scratch: {added / cost:.2f} of it (target <= 0.2: "
              f"{'met' if added / cost <= 0.2 else 'NOT met'})")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
