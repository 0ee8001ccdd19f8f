"""The report's pages rendered by this checkout's code against an older commit's, side by side.

    .venv/bin/python benchmarks/pages_render.py [--old main] [--new COMMIT] [--workdir DIR]
        [--directions 1062] [--sentences 854] [--models 5] [--rounds 3]

Builds an output folder of BOUQuET's shape as the workflow leaves it (tests/synthetic.py
`write_shaped_run`: per model scored_rows.parquet, scores.csv, resampled.npz and
report_extract.parquet; leaderboard.csv) and a correlations.csv of the same directions
(tests/test_metaeval.py `correlations_at_scale`). The package of `--old` is read from git into a
temporary folder (`git archive`), and so is `--new`'s where given (else the checkout's own
package is the new side). Then, in turns (old, new, old, new, ...), each in a fresh
process that imports one of the two packages:
- `pages`: the HTML alone: the leaderboard, results, sentences, run and "Which metric to
  trust" pages from the data each version computes for them (computed before the clock
  starts), as a job renders them: the first pages it renders, the template engine imported
  and the templates compiled on the way;
- `pages-warm`: the same with the engine imported and the templates compiled before the clock
  starts: the rendering work alone, without the cost a job pays once;
- `report`: everything the leaderboard job adds to the report, as `report.write_figures`
  does it (statistics against the baseline, figures, pages).
Prints each turn's wall and CPU seconds, the medians, the new code's over the old's, and the
pages' sizes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
COLUMNS = ["chrfpp", "metricx"]
LOWER = {"metricx"}
CLOCKS = ("wall_s", "cpu_s")
MODULES = ("report", "trust", "views")


def names(count: int) -> list[str]:
    return [f"model-{number + 1}" for number in range(count)]


def measured(function: Any) -> dict[str, float]:
    started, cpu = time.perf_counter(), time.process_time()
    function()
    return {"wall_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu}


def child(kind: str, output: Path, count: int, target: Path) -> None:
    """One turn, with whichever package is first on sys.path."""
    import importlib
    import importlib.util

    import pandas as pd

    from bouquet_eval.core.stats import Resampling
    from bouquet_eval.results.extracts import EXTRACT_FILE, ReportExtract, from_extracts
    from bouquet_eval.results.leaderboard import build_leaderboard, read_results
    from bouquet_eval.results.resampled import RESAMPLED_FILE

    # Either version's modules, whose functions differ: typed as Any.
    module: Any = importlib.import_module
    report, trust, views = (module(f"bouquet_eval.results.{name}") for name in MODULES)
    templated = importlib.util.find_spec("bouquet_eval.results.rendering") is not None
    if templated:
        pages = module("bouquet_eval.results.pages")
        versus_baseline = module("bouquet_eval.results.compare").versus_baseline
        figure_paths = module("bouquet_eval.results.paths").figure_paths
    else:  # the code before the templates: pages in report.py, a style handed to each
        pages = report
        versus_baseline = report.versus_baseline
        figure_paths = report.figure_paths

    models = names(count)
    resampling = Resampling()
    rows = {m: output / m / "scored_rows.parquet" for m in models}
    files = [(output / m / "scores.csv", rows[m], output / m / RESAMPLED_FILE) for m in models]
    results = read_results(models, files, COLUMNS, resampling)
    board = build_leaderboard(results, COLUMNS, LOWER, resampling)
    timing = pd.DataFrame({"seconds": [2.0, 3.0], "sentences_per_second": [4.0, 5.0]})
    manifests = {m: json.loads((output / m / "manifest.json").read_text()) for m in models}
    config = {"dataset": {"path": str(output.parent / "dataset")}, "metrics": ["chrf", "metricx"]}
    run = report.RunRecords(
        timing={m: timing for m in models},
        gpus={m: 0 for m in models},
        config=config,
        manifests=manifests,
    )
    first = results[0].scores
    directions = [f"{s}-{t}" for s, t in zip(first["src_lang"], first["tgt_lang"], strict=True)]
    paths = figure_paths(target, models, COLUMNS, directions)
    extracts = {m: output / m / EXTRACT_FILE for m in models}
    frame = pd.read_csv(output.parent / "correlations.csv")
    if not templated:  # the pool without English came with the templates
        frame = frame[frame["name"] != "without_english"]

    if kind == "report":
        turn = measured(
            lambda: report.write_figures(
                paths, board, results, rows, run, LOWER, resampling, models[-1], extracts
            )
        )
        trust_data = trust.trust_data(frame, "acc_eq", 0.05)
        text = trust.trust_page(trust_data) if templated else trust.trust_page(
            trust_data, trust.TRUST_STYLE
        )  # fmt: skip
        turn["bytes"] = len(text.encode("utf-8")) + sum(
            path.stat().st_size for path in target.rglob("*.html")
        )
        print(json.dumps(turn))
        return

    # The data of each page, computed before the clock starts, and matplotlib imported (the
    # earlier code's forest plot draws through it; the package's own no longer imports it).
    import matplotlib.figure  # noqa: F401

    if templated and kind == "pages-warm":
        rendering = module("bouquet_eval.results.rendering")
        for template in rendering.TEMPLATES.glob("*.html"):
            rendering._environment().get_template(template.name)

    ordered = list(board["model"])
    scores = {r.name: r.scores for r in results}
    statistics_ = {r.name: r.statistics(COLUMNS, resampling) for r in results}
    versus = versus_baseline(
        board, report.LazyRows({r.name: r for r in results}), statistics_, models[-1], resampling
    )
    results_data = views.results_data(scores, ordered, COLUMNS, LOWER, "metricx", versus)
    read = {name: ReportExtract.read(extracts[name]) for name in ordered}
    made = from_extracts(read, rows, ordered, COLUMNS, "metricx", True)
    assert made is not None
    sentences = made[1]
    parts = list(paths["sentences"])
    trust_data = trust.trust_data(frame, "acc_eq", 0.05)
    style: tuple[Any, ...] = () if templated else (report.STYLE,)
    trust_style: tuple[Any, ...] = () if templated else (trust.TRUST_STYLE,)
    written: list[str] = []

    def render() -> None:
        written.append(pages.leaderboard_page(board, LOWER))
        written.append(views.results_page(results_data, *style))
        written.extend(views.sentences_pages(sentences, parts, *style))
        written.append(pages.run_page(config, manifests))
        written.append(trust.trust_page(trust_data, *trust_style))

    turn = measured(render)
    turn["bytes"] = sum(len(text.encode("utf-8")) for text in written)
    print(json.dumps(turn))


def in_child(scripts: Path, kind: str, output: Path, count: int) -> dict[str, float]:
    target = Path(tempfile.mkdtemp(prefix=f"pages-{kind}-"))
    command = [
        sys.executable,
        __file__,
        "--child",
        str(scripts),
        kind,
        str(output),
        str(count),
        str(target),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    shutil.rmtree(target)
    if completed.returncode:
        raise RuntimeError(completed.stderr[-3000:])
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", default="main", help="the commit whose code is the old side")
    parser.add_argument("--new", help="the commit whose code is the new side (default: this one)")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        scripts, kind, output, count, target = arguments.child
        sys.path[:0] = [scripts, str(REPOSITORY)]
        child(kind, Path(output), int(count), Path(target))
        return

    sys.path[:0] = [str(REPOSITORY / "scripts"), str(REPOSITORY)]
    from measuring import extract_package

    from bouquet_eval.results.extracts import EXTRACT_FILE
    from tests.synthetic import bouquet_shaped_directions, write_shaped_run
    from tests.test_metaeval import correlations_at_scale

    workdir = arguments.workdir or Path(tempfile.mkdtemp(prefix="pages-render-"))
    directions = bouquet_shaped_directions(total=arguments.directions)
    output = workdir / "runs"
    models = names(arguments.models)
    print(f"{len(directions)} directions x {arguments.sentences} sentences x {len(models)} "
          f"models, in {workdir}")  # fmt: skip
    if not all((output / m / EXTRACT_FILE).exists() for m in models):
        write_shaped_run(workdir, models, arguments.sentences, directions)
    correlations_at_scale(directions).to_csv(workdir / "correlations.csv", index=False)
    sides = {
        "old": extract_package(arguments.old, Path(tempfile.mkdtemp(prefix="pages-old-"))),
        "new": REPOSITORY / "scripts"
        if arguments.new is None
        else extract_package(arguments.new, Path(tempfile.mkdtemp(prefix="pages-new-"))),
    }
    for kind in ("pages", "pages-warm", "report"):
        turns: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for number in range(arguments.rounds):
            for side, scripts in sides.items():
                turn = in_child(scripts, kind, output, len(models))
                turns[side].append(turn)
                print(f"{kind} {side} turn {number + 1}: {turn['wall_s']:.2f} s wall, "
                      f"{turn['cpu_s']:.2f} CPU-s, {turn['bytes'] / 1e6:.2f} MB")  # fmt: skip
        medians = {
            side: {clock: statistics.median(t[clock] for t in found) for clock in CLOCKS}
            for side, found in turns.items()
        }
        print(
            f"{kind}: old {medians['old']['wall_s']:.2f} s wall ({medians['old']['cpu_s']:.2f} "
            f"CPU-s), new {medians['new']['wall_s']:.2f} s ({medians['new']['cpu_s']:.2f} CPU-s): "
            f"new/old {medians['new']['wall_s'] / medians['old']['wall_s']:.2f}x wall, "
            f"{medians['new']['cpu_s'] / medians['old']['cpu_s']:.2f}x CPU (medians of "
            f"{arguments.rounds})"
        )
    for side in ("old", "new"):
        if sides[side] != REPOSITORY / "scripts":
            shutil.rmtree(sides[side].parent)


if __name__ == "__main__":
    main()
