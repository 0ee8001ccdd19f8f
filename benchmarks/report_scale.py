"""The report's pages and the sentence browser at BOUQuET's full shape.

    .venv/bin/python benchmarks/report_scale.py [--workdir DIR] [--directions 1062]
        [--sentences 854] [--models 5]

Builds an output folder as the workflow leaves it (tests/synthetic.py `write_shaped_run`):
`--directions` directions over 268 languages (every language into and out of English, then
regional pairs), `--sentences` sentences each, `--models` models with scored_rows.parquet,
scores.csv (made by the aggregation's code) and a manifest naming a local dataset with domain
and register. Then times, with the workflow's own code and its default statistics (1000
bootstrap resamples, 10,000 approximate-randomization trials):
- the leaderboard (intervals and significance clusters);
- the report's pages and figures (`report.write_figures`, what the leaderboard job adds);
and prints each page's size. Where Chromium is installed, it times opening the results page
until its table is drawn, and every view; and it times the sentence browser's answer for three
directions (every sentence of every model; the server indexes the files before the clock
starts, and no answer comes from its cache).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bouquet_eval.results.browse import serve

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
from tests import browser  # noqa: E402
from tests.synthetic import bouquet_shaped_directions, write_shaped_run  # noqa: E402


async def open_results(page_path: Path) -> dict[str, float]:
    """Seconds until the results page shows each view's table."""
    timings = {}
    async with browser.chromium() as page:
        started = time.perf_counter()
        await page.open(page_path.as_uri())
        await page.wait_for("document.getElementById('app').dataset.rows", timeout=120)
        timings["open, first view drawn"] = time.perf_counter() - started
        for view in ("regional", "directions", "versus"):
            started = time.perf_counter()
            await page.evaluate(f"document.querySelector('button[data-view={view}]').click()")
            await page.wait_for(
                f"document.getElementById('app').dataset.view === '{view}'", timeout=120
            )
            timings[f"view {view}"] = time.perf_counter() - started
        if page.errors:
            raise RuntimeError(f"page errors: {page.errors}")
    return timings


def time_browser(output: Path, directions: list[str]) -> dict[str, float]:
    server = serve(output, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    timings = {}
    try:
        for direction in directions:
            started = time.perf_counter()
            url = f"http://127.0.0.1:{server.server_port}/api/sentences?direction={direction}"
            with urllib.request.urlopen(url) as reply:
                rows = len(json.load(reply)["rows"])
            timings[f"{direction} ({rows} sentences)"] = time.perf_counter() - started
    finally:
        server.shutdown()
        server.server_close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--models", type=int, default=5)
    arguments = parser.parse_args()
    workdir = arguments.workdir or Path(tempfile.mkdtemp(prefix="report-scale-"))
    directions = bouquet_shaped_directions(total=arguments.directions)
    models = [f"model-{number + 1}" for number in range(arguments.models)]
    print(
        f"{len(directions)} directions x {arguments.sentences} sentences x {len(models)} models "
        f"in {workdir}"
    )
    seconds = write_shaped_run(workdir, models, arguments.sentences, directions)
    for step, value in seconds.items():
        print(f"{step:>16}: {value:7.1f} s")
    report = workdir / "runs" / "report"
    total = 0
    for path in sorted(p for p in report.rglob("*") if p.is_file()):
        total += path.stat().st_size
        if path.suffix == ".html":
            print(f"{path.relative_to(report)}: {path.stat().st_size / 1e6:.2f} MB")
    print(f"report pages and figures: {total / 1e6:.2f} MB in all")
    if browser.chromium_path():
        for step, value in asyncio.run(open_results(report / "results.html")).items():
            print(f"results page, {step}: {value:.2f} s")
    names = [str(directions[i]) for i in (0, len(directions) // 2, len(directions) - 1)]
    for step, value in time_browser(workdir / "runs", names).items():
        print(f"browser answer, {step}: {value:.3f} s")


if __name__ == "__main__":
    main()
