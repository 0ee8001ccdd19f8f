"""The leaderboard and the report at BOUQuET's shape with 2, 5 and 10 models, against a baseline.

    .venv/bin/python benchmarks/results_scale.py [--workdir DIR] [--directions 1062]
        [--sentences 854] [--models 2 5 10]

Builds an output folder as the workflow leaves it (tests/synthetic.py: per model
scored_rows.parquet, scores.csv and resampled.npz made by the aggregation's own code with the
default statistics, 1000 bootstrap resamples, and report_extract.parquet by its `heatmaps`
job's), for the largest number of models plus one.
Then, each in a fresh process (wall and CPU seconds, peak memory of that process):
- a model's own share, once per model and kept beside its scores: `statistics`, its
  scores.csv and resampled.npz from its rows (the work its aggregation job does for the
  leaderboard and the report) and its heatmaps; `extract`, its report_extract.parquet (violins,
  worst and sample sentences, which its `heatmaps` job also makes);
- per number of models M: `leaderboard` (read the models' files, intervals, p vs best and
  clusters, leaderboard.csv and .md) and `report` (every page and figure the leaderboard job
  draws: versus-baseline tests, distributions, sentences...), with the workflow's code;
- `baseline`: a small numpy/pyarrow program computing the same statistics from the same
  scored_rows.parquet files (each model's resample means as one count-matrix product, the
  macro intervals, the paired p-values against the best and the clusters, each model's
  per-direction paired tests against the baseline with Benjamini-Hochberg), no pages;
- adding one model to a finished leaderboard of the largest M: that model's own share and
  the leaderboard (and report) jobs of M + 1 models, against building the M models' from
  scratch (M models' own shares and the jobs of M).
Prints the ratios the targets are stated in (issue 29), the M models' extracts counted in
beside the jobs' own times (the work they took over from the leaderboard job), and whether
each target is met.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from measuring import child_json

REPOSITORY = Path(__file__).resolve().parent.parent
# This checkout's package and tests, whatever the environment has installed.
sys.path[:0] = [str(REPOSITORY / "scripts"), str(REPOSITORY)]

COLUMNS = ["chrfpp", "metricx"]
RESAMPLED = "resampled.npz"
LOWER = {"metricx"}


def names(count: int) -> list[str]:
    return [f"model-{number + 1}" for number in range(count)]


def peak_mb() -> float:
    """This process's peak resident memory. Not getrusage's ru_maxrss: Linux keeps that across
    exec, so a child would report the peak of the process that started it."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measured(step: str, function: Callable[[], None]) -> dict[str, Any]:
    started, cpu = time.perf_counter(), time.process_time()
    function()
    return {
        "step": step,
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
        "peak_mb": peak_mb(),
    }


def child_statistics(output: Path, model: str) -> None:
    import pandas as pd

    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.aggregate import direction_table
    from bouquet_eval.results.extracts import EXTRACT_FILE, model_extract
    from bouquet_eval.results.report import write_heatmaps

    # The columns its aggregation resamples (the texts are no part of its statistics).
    keys_and_scores = ["src_lang", "tgt_lang", "uniq_id", *COLUMNS]
    rows = pd.read_parquet(output / model / "scored_rows.parquet", columns=keys_and_scores)
    folder = Path(tempfile.mkdtemp(prefix="statistics-"))

    def run() -> None:
        table = direction_table(rows, COLUMNS, Resampling())
        table.scores.to_csv(folder / "scores.csv", index=False)
        table.resampled.write(folder / "resampled.npz")
        heatmaps = {column: folder / f"{column}.svg" for column in COLUMNS}
        write_heatmaps(heatmaps, table.scores, model, LOWER)

    def extract() -> None:
        scored = output / model / "scored_rows.parquet"
        model_extract(scored, COLUMNS, LOWER).write(folder / EXTRACT_FILE)

    print(json.dumps([measured("statistics", run), measured("extract", extract)]))


def leaderboard_job(output: Path, models: list[str], target: Path) -> tuple[Any, Any]:
    """The leaderboard job's first part: the models' files read, leaderboard.csv and .md
    written into `target`; (the models' results, the leaderboard)."""
    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.leaderboard import build_leaderboard, read_results, write_leaderboard

    resampling = Resampling()
    files = [
        (output / m / "scores.csv", output / m / "scored_rows.parquet", output / m / RESAMPLED)
        for m in models
    ]
    results = read_results(models, files, COLUMNS, resampling)
    board = build_leaderboard(results, COLUMNS, LOWER, resampling)
    write_leaderboard(board, target / "leaderboard.csv", target / "leaderboard.md", LOWER)
    return results, board


def report_pages(output: Path, models: list[str], target: Path, results: Any, board: Any) -> None:
    """The leaderboard job's second part: every page and figure of the report, under
    `target/report`, the last model as the results page's baseline."""
    import pandas as pd

    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.extracts import EXTRACT_FILE
    from bouquet_eval.results.report import RunRecords, figure_paths, write_figures

    timing = pd.DataFrame({"seconds": [2.0, 3.0], "sentences_per_second": [4.0, 5.0]})
    run = RunRecords(
        timing={m: timing for m in models},
        gpus={m: 0 for m in models},
        config={"dataset": {"path": str(output.parent / "dataset")}},
        manifests={m: {"entries": []} for m in models},
    )
    first = results[0].scores
    directions = [f"{s}-{t}" for s, t in zip(first["src_lang"], first["tgt_lang"], strict=True)]
    paths = figure_paths(target / "report", models, COLUMNS, directions)
    rows = {m: output / m / "scored_rows.parquet" for m in models}
    extracts = {m: output / m / EXTRACT_FILE for m in models}
    write_figures(paths, board, results, rows, run, LOWER, Resampling(), models[-1], extracts)


def child_leaderboard(output: Path, count: int, report: bool) -> None:
    models = names(count)
    target = Path(tempfile.mkdtemp(prefix=f"leaderboard-{count}-"))
    built: dict[str, Any] = {}

    def leaderboard() -> None:
        built["results"], built["board"] = leaderboard_job(output, models, target)

    def pages() -> None:
        report_pages(output, models, target, built["results"], built["board"])

    steps = [measured("leaderboard", leaderboard)]
    if report:
        steps.append(measured("report", pages))
    print(json.dumps(steps))


def p_values(deltas: Any, observed: Any) -> Any:
    """The paired bootstrap p-value of each row of resampled `deltas` against its `observed`
    delta, in plain numpy (`stats.bootstrap_p_values`' definition)."""
    import numpy as np

    absolute = np.abs(deltas)
    centred = absolute - absolute.mean(axis=1, keepdims=True)
    real = np.abs(observed)
    tolerance = 1e-9 * np.maximum(real, np.abs(centred).max(axis=1))
    return (np.sum(centred >= (real - tolerance)[:, None], axis=1) + 1) / (deltas.shape[1] + 1)


def child_baseline(output: Path, count: int) -> None:
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from bouquet_eval.core.stats import Resampling, benjamini_hochberg

    resampling = Resampling()
    models = names(count)

    def run() -> None:
        means, resamples = {}, {}
        for model in models:
            table = pq.read_table(
                output / model / "scored_rows.parquet", columns=["src_lang", "tgt_lang", *COLUMNS]
            )
            order = pc.sort_indices(
                table, sort_keys=[("src_lang", "ascending"), ("tgt_lang", "ascending")]
            )
            table = table.take(order)
            directions = table.group_by(["src_lang", "tgt_lang"]).aggregate([]).num_rows
            size = table.num_rows // directions
            weights = resampling.bootstrap_weights(size)
            for column in COLUMNS:
                values = table[column].to_numpy().reshape(directions, size)
                means[model, column] = values.mean(axis=1)
                resamples[model, column] = values @ weights.T / size
        for model in models:  # the leaderboard's intervals
            for column in COLUMNS:
                ordered = np.sort(resamples[model, column].mean(axis=0))
                _ = ordered[len(ordered) // 40], ordered[-len(ordered) // 40 - 1]
        primary = "metricx"
        ranked = sorted(models, key=lambda m: means[m, primary].mean())
        best = ranked[0]

        def pooled_p(first: str, second: str) -> float:
            deltas = (resamples[second, primary] - resamples[first, primary]).mean(axis=0)
            delta = means[second, primary].mean() - means[first, primary].mean()
            return float(p_values(deltas[None, :], np.array([delta]))[0])

        head = best
        for model in ranked[1:]:  # p vs best and clusters
            p = pooled_p(best, model)
            if head != best:
                p = pooled_p(head, model)
            if p < 0.05:
                head = model
        baseline = models[-1]
        for model in models:  # the report's tests against the baseline, per direction
            if model != baseline:
                deltas = resamples[model, primary] - resamples[baseline, primary]
                observed = means[model, primary] - means[baseline, primary]
                benjamini_hochberg(p_values(deltas, observed))

    print(json.dumps(measured("baseline", run)))


def in_child(*arguments: str) -> Any:
    return child_json(__file__, *arguments)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--models", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        kind, output, *rest = arguments.child
        if kind == "statistics":
            child_statistics(Path(output), rest[0])
        elif kind == "baseline":
            child_baseline(Path(output), int(rest[0]))
        else:
            child_leaderboard(Path(output), int(rest[0]), kind == "report")
        return

    from bouquet_eval.results.extracts import EXTRACT_FILE
    from tests.synthetic import bouquet_shaped_directions, write_dataset, write_model_run

    workdir = arguments.workdir or Path(tempfile.mkdtemp(prefix="results-scale-"))
    directions = bouquet_shaped_directions(total=arguments.directions)
    largest = max(arguments.models)
    output = workdir / "runs"
    print(f"{len(directions)} directions x {arguments.sentences} sentences, in {workdir}")
    if not (workdir / "dataset").exists():
        write_dataset(workdir / "dataset", directions, arguments.sentences)
    for number, model in enumerate(names(largest + 1)):
        if not (output / model / EXTRACT_FILE).exists():
            write_model_run(
                output / model, directions, arguments.sentences, shift=-0.5 * number, seed=number
            )

    own, extract = in_child("statistics", str(output), "model-1")
    per_model = {clock: own[clock] + extract[clock] for clock in ("wall_s", "cpu_s")}
    print(
        f"one model's own share: statistics and heatmaps {own['wall_s']:.1f} s wall "
        f"({own['cpu_s']:.1f} CPU-s, {own['peak_mb']:.0f} MB peak), report extract "
        f"{extract['wall_s']:.1f} s ({extract['cpu_s']:.1f} CPU-s, {extract['peak_mb']:.0f} MB "
        "peak)"
    )
    peaks = [own["peak_mb"], extract["peak_mb"]]
    jobs: dict[tuple[int, str], float] = {}
    leaderboards: dict[tuple[int, str], float] = {}
    at_five = None
    for count in [*sorted(arguments.models), largest + 1]:
        leaderboard, report = in_child("report", str(output), str(count))
        baseline = in_child("baseline", str(output), str(count))
        peaks += [leaderboard["peak_mb"], report["peak_mb"]]
        for clock in ("wall_s", "cpu_s"):
            jobs[count, clock] = leaderboard[clock] + report[clock]
            leaderboards[count, clock] = leaderboard[clock]
        with_extracts = jobs[count, "wall_s"] + count * extract["wall_s"]
        print(
            f"{count:>2} models: leaderboard {leaderboard['wall_s']:5.1f} s "
            f"({leaderboard['cpu_s']:.1f} CPU-s, {leaderboard['peak_mb']:.0f} MB peak) + report "
            f"{report['wall_s']:5.1f} s ({report['cpu_s']:.1f} CPU-s, {report['peak_mb']:.0f} MB "
            f"peak) = {jobs[count, 'wall_s']:5.1f} s ({jobs[count, 'cpu_s']:.1f} CPU-s); baseline "
            f"{baseline['wall_s']:4.1f} s ({baseline['cpu_s']:.1f} CPU-s, "
            f"{baseline['peak_mb']:.0f} MB peak): "
            f"{jobs[count, 'wall_s'] / baseline['wall_s']:.2f}x the baseline's wall time, "
            f"{jobs[count, 'cpu_s'] / baseline['cpu_s']:.2f}x its CPU time; with the "
            f"{count} extracts {with_extracts:.1f} s, "
            f"{with_extracts / baseline['wall_s']:.2f}x the baseline's wall time"
        )
        if count == 5:
            at_five = {
                clock: (jobs[count, clock], jobs[count, clock] / baseline[clock])
                for clock in ("wall_s", "cpu_s")
            }
    small, large = (
        sorted(arguments.models)[-2:] if len(arguments.models) > 1 else (largest, largest)
    )
    growth = {}
    for clock in ("wall_s", "cpu_s"):
        growth[clock] = jobs[large, clock] / jobs[small, clock]
        print(f"{small} -> {large} models: {growth[clock]:.2f}x the {clock[:-2]} time")
    added_share = {}
    for clock in ("wall_s", "cpu_s"):
        for label, times in (("leaderboard", leaderboards), ("leaderboard + report", jobs)):
            scratch = largest * per_model[clock] + times[largest, clock]
            added = per_model[clock] + times[largest + 1, clock]
            added_share[label, clock] = added / scratch
            print(
                f"adding a model to {largest} ({label}, {clock[:-2]}): {added:.1f} s against "
                f"{scratch:.1f} s from scratch: {added / scratch:.2f} of it"
            )
    # Wall time is what the targets name; on shared cores the CPU time is the steadier.
    print("targets (wall time; CPU time):")
    if at_five is not None:
        (seconds, ratio), (cpu_seconds, cpu_ratio) = at_five["wall_s"], at_five["cpu_s"]
        print(f"  5 models within 60 s: {seconds:.1f} s; {cpu_seconds:.1f} CPU-s, "
              f"{met(seconds <= 60)}")  # fmt: skip
        print(f"  5 models at most 3x the baseline: {ratio:.2f}x; {cpu_ratio:.2f}x, "
              f"{met(ratio <= 3)}")  # fmt: skip
    print(f"  {small} -> {large} models at most 2.2x: {growth['wall_s']:.2f}x; "
          f"{growth['cpu_s']:.2f}x, {met(growth['wall_s'] <= 2.2)}")  # fmt: skip
    share = added_share["leaderboard + report", "wall_s"]
    print(f"  adding a model at most a fifth: {share:.3f}; "
          f"{added_share['leaderboard + report', 'cpu_s']:.3f}, {met(share <= 0.2)}")  # fmt: skip
    print(f"  peak memory at most 1 GB: {max(peaks):.0f} MB, {met(max(peaks) <= 1000)}")


def met(condition: bool) -> str:
    return "met" if condition else "NOT met"


if __name__ == "__main__":
    main()
