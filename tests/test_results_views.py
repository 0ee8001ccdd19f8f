"""The results at BOUQuET's real shape: the report's interactive pages, the corrected p-values,
the dense heatmap and the sentence browser, on 1062 directions over 268 languages, 5 models."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bouquet_eval.core.stats import Resampling, benjamini_hochberg
from bouquet_eval.planning.channel import declared_settings, slice_of
from bouquet_eval.planning.schema import load_schema
from bouquet_eval.results.aggregate import ROW_GROUP_ROWS
from bouquet_eval.results.browse import IDLE_SECONDS, placed_spans, serve
from bouquet_eval.results.compare import compare_models
from bouquet_eval.results.figures import dense_languages
from bouquet_eval.results.pages import run_page
from bouquet_eval.results.views import DECIMALS, describe_language, results_page, rounded_scores

from . import browser
from .conftest import REPOSITORY, patience
from .leaderboard_models import SMALL, synthetic_model
from .synthetic import (
    ENGLISH,
    bouquet_shaped_directions,
    synthetic_directions,
    write_model_run,
    write_shaped_run,
)

SCHEMA_FILE = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"

MODELS = ["alpha", "bravo", "charlie", "delta", "echo"]
SENTENCES = 3


def test_benjamini_hochberg_matches_the_step_up_definition() -> None:
    p = [0.01, 0.04, 0.03, float("nan"), 0.5]
    # Sorted 0.01, 0.03, 0.04, 0.5 of m = 4: 0.04, 0.06, 0.0533, 0.5, then the running minimum
    # from the largest down.
    adjusted = benjamini_hochberg(p)
    assert adjusted[[0, 2, 1, 4]] == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert np.isnan(adjusted[3])
    assert benjamini_hochberg([0.9, 0.9]).tolist() == [0.9, 0.9]


def test_comparison_has_corrected_p_values_beside_the_raw_ones() -> None:
    rng = np.random.default_rng(1)
    frames = {}
    for name, shift in (("base", 0.0), ("system", 4.0)):
        frames[name] = pd.DataFrame(
            {
                "src_lang": np.repeat(["eng_Latn", "fra_Latn", "deu_Latn"], 30),
                "tgt_lang": np.repeat(["fra_Latn", "eng_Latn", "fra_Latn"], 30),
                "uniq_id": np.tile([f"s{i}" for i in range(30)], 3),
                "chrfpp": np.linspace(20, 80, 90)
                + shift * (np.arange(90) >= 60)
                + rng.normal(0, 0.5, 90),
            }
        )
    resampling = Resampling(seed=3, bootstrap_resamples=200, ar_trials=200)
    comparison = compare_models(frames, "base", ["chrfpp"], resampling)
    columns = list(comparison.columns)
    for raw in ("p_paired_bootstrap", "p_approximate_randomization"):
        assert columns[columns.index(raw) + 1] == f"{raw}_bh"
        directions = comparison[comparison["src_lang"] != "all"]
        assert directions[f"{raw}_bh"].to_numpy() == pytest.approx(
            benjamini_hochberg(directions[raw].to_numpy())
        )
        assert (directions[f"{raw}_bh"] >= directions[raw]).all()
        pooled = comparison[comparison["src_lang"] == "all"].iloc[0]
        assert pooled[f"{raw}_bh"] == pooled[raw]


def test_the_heatmap_keeps_the_languages_paired_with_each_other() -> None:
    others = [f"{letter}aa_Latn" for letter in "bcdefghijk"]
    cluster = ["faa_Latn", "haa_Latn", "jaa_Latn", "kaa_Latn"]
    pairs = [(ENGLISH, code) for code in others] + [(code, ENGLISH) for code in others]
    pairs += [(a, b) for a in cluster for b in cluster if a != b]
    pairs += [("baa_Latn", "caa_Latn")]  # one regional pair outside the cluster
    scores = pd.DataFrame(pairs, columns=["src_lang", "tgt_lang"])
    # English first, then the four languages all paired with each other.
    assert dense_languages(scores, 5) == [ENGLISH, *cluster]
    # Few languages: all of them, in the heatmap's order.
    assert dense_languages(scores, 40) == [ENGLISH, *sorted(others)]


def test_the_run_page_shows_the_dataset_that_was_read() -> None:
    config = {"dataset": {"name": "facebook/bouquet", "revision": "main", "path": "/data/b"}}
    shown = run_page(config, {})
    assert "path: /data/b" in shown and "facebook/bouquet" not in shown
    hub = run_page({"dataset": {"name": "facebook/bouquet", "revision": "v1", "path": None}}, {})
    assert "name: facebook/bouquet" in hub and "revision: v1" in hub and "path:" not in hub


def test_the_run_page_shows_the_settings_of_the_metrics_computed_only() -> None:
    """The page shows what the leaderboard job read (its slice of the configuration): the
    settings of the metrics the run computes, not every built-in metric's."""
    config = {
        "metrics": ["chrf", "comet"],
        "comet": {"model": "Unbabel/wmt22-comet-da"},
        "metricx": {"model": "google/metricx-24-hybrid-xl-v2p6"},
        "blaser": {"encoder": "facebook/SONAR"},
    }
    settings = declared_settings(load_schema(SCHEMA_FILE))
    shown = run_page(slice_of(config, settings, "leaderboard"), {})
    assert "Unbabel/wmt22-comet-da" in shown
    assert "metricx" not in shown and "blaser" not in shown


def test_page_scores_are_rounded_as_round_rounds_them() -> None:
    """The vectorised rounding gives `round`'s doubles, signed zeros and the halves too."""
    rng = np.random.default_rng(7)
    places = 10.0**DECIMALS
    halves = (rng.integers(-(10**6), 10**6, 20_000) + 0.5) / places
    values = np.concatenate(
        [
            rng.uniform(-100, 100, 200_000),
            rng.normal(0, 1e-3, 20_000),
            halves,
            halves + rng.normal(0, 1e-13, halves.size),
            rng.uniform(-1e12, 1e12, 1_000),
            [np.nan, np.inf, -np.inf, 0.0, -0.0, -4e-5, 5e-5, 1.5e-4, 1e-320, 1e300, -1e300],
        ]
    )
    expected = [round(float(v), DECIMALS) if np.isfinite(v) else None for v in values]
    found = rounded_scores(values)
    assert found == expected
    assert json.dumps(found) == json.dumps(expected)  # -0.0 where round gives it


def test_languages_have_names_scripts_and_regions() -> None:
    swahili = describe_language("swh_Latn")
    assert (swahili.name, swahili.script, swahili.region) == ("Swahili", "Latin", "Tanzania")
    serbian = describe_language("srp_Cyrl")
    assert (serbian.script, serbian.region) == ("Cyrillic", "Serbia")


# --- BOUQuET's shape ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1062 directions over 268 languages, 3 sentences each, 5 models; the report's pages."""
    root = tmp_path_factory.mktemp("shaped")
    directions = bouquet_shaped_directions()
    assert len(directions) == 1062
    assert len({d.src_lang for d in directions} | {d.tgt_lang for d in directions}) == 268
    write_shaped_run(root, MODELS, SENTENCES, directions)
    return root / "runs"


@pytest.fixture(scope="module")
def chromium() -> None:
    browser.require()


TABLE = "Tabulator.findTable('#table')[0]"
VIEWS = {"language": 267, "regional": 1062 - 2 * 267, "directions": 1062, "versus": 1062}


def test_the_report_pages_at_bouquet_shape(shaped: Path, chromium: None, tmp_path: Path) -> None:
    asyncio.run(_report_pages(shaped / "report", tmp_path))


async def _report_pages(report: Path, scratch: Path) -> None:
    async with browser.chromium() as page:
        await page.open((report / "results.html").as_uri())
        for view, rows in VIEWS.items():
            button = f"document.querySelector('button[data-view={view}]')"
            await page.wait_for(f"{button} !== null")
            await page.evaluate(f"{button}.click()")
            await page.wait_for(
                f"document.getElementById('app').dataset.view === '{view}' && "
                f"document.getElementById('app').dataset.rows === '{rows}' && "
                "document.querySelectorAll('.tabulator-row').length > 10"
            )
        # Against the chosen baseline (the last model): every other model, corrected p-values.
        summary = await page.evaluate("document.querySelector('.summary').textContent")
        assert summary.startswith("Δ = alpha \N{MINUS SIGN} echo on metricx")
        assert "Benjamini-Hochberg over the 1062 directions" in summary
        # The language view searches names, and sorts with the intervals beside the scores.
        await page.evaluate("document.querySelector('button[data-view=language]').click()")
        await page.wait_for("document.getElementById('app').dataset.view === 'language'")
        found = await page.wait_for(
            f"(() => {{ const t = {TABLE}; t.setHeaderFilterValue('name', 'Breton');"
            " return t.getData('active').map(r => [r.code, r.region, r.into, r['into~ci']]); })()"
        )
        assert [row[:2] for row in found] == [["bre_Latn", "France"]]
        low, high = found[0][3]
        assert low <= found[0][2] <= high
        assert page.errors == []
        # A metric's decimal places are its record's, through the page's data: one decimal
        # where a record says so.
        text = (report / "results.html").read_text(encoding="utf-8")
        data = json.loads(text.split('type="application/json">', 1)[1].split("</script>", 1)[0])
        assert data["decimals"] == {"chrfpp": 2, "metricx": 2}
        data["decimals"]["metricx"] = 1
        variant = scratch / "results-one-decimal.html"
        variant.write_text(results_page(data), encoding="utf-8")
        await page.open(variant.as_uri())
        cells = await page.wait_for(
            "document.querySelectorAll('.tabulator-row').length > 10 && JSON.stringify("
            "Array.from(document.querySelectorAll('.tabulator-row')[0].children)"
            ".map(cell => cell.innerText.split('\\n')[0]))"
        )
        numbers = [cell for cell in json.loads(cells) if re.fullmatch(r"-?\d+\.\d+", cell)]
        assert numbers and all(re.fullmatch(r"-?\d+\.\d", cell) for cell in numbers), cells
        assert page.errors == []
        # A column whose best value is a target: labelled so, sorted by the distance to it,
        # and judged against the baseline by it.
        data["targets"] = {"metricx": 5.0}
        variant.write_text(results_page(data), encoding="utf-8")
        await page.open(variant.as_uri())
        shown = json.loads(
            await page.wait_for(
                "document.querySelectorAll('.tabulator-row').length > 10 && JSON.stringify(["
                "document.querySelector('select[data-control=metric]').selectedOptions[0].text,"
                f" {TABLE}.getData('active').map(r => r.into)])"
            )
        )
        assert shown[0] == "metricx (closest to 5 is best)"
        distances = [abs(v - 5) for v in shown[1] if v is not None]
        assert len(distances) > 100 and distances == sorted(distances)
        await page.evaluate("document.querySelector('button[data-view=versus]').click()")
        rows = json.loads(
            await page.wait_for(
                "document.getElementById('app').dataset.view === 'versus' &&"
                " document.querySelectorAll('.tabulator-row').length > 10 &&"
                f" JSON.stringify({TABLE}.getData('active').map(r => [r.direction, r.q,"
                " r.verdict]))"
            )
        )
        versus = data["versus"]
        system = next(iter(versus["systems"]))
        position = {f"{s}-{t}": i for i, (s, t, _) in enumerate(data["directions"])}
        verdicts = set()
        for direction, q, verdict in rows:
            base = data["scores"]["metricx"][versus["baseline"]][0][position[direction]]
            own = data["scores"]["metricx"][system][0][position[direction]]
            if q is not None and q < 0.05:
                assert verdict == ("better" if abs(own - 5) < abs(base - 5) else "worse")
                verdicts.add(verdict)
        assert verdicts == {"better", "worse"}, rows[:5]
        assert page.errors == []

        await page.open((report / "sentences-1.html").as_uri())
        shown = await page.wait_for(
            "document.getElementById('app').dataset.direction &&"
            " document.querySelectorAll('dl.sentence').length"
        )
        # The sample with every model, then each model's worst sentences.
        assert shown == 1 + len(MODELS) * SENTENCES
        await page.open((report / "leaderboard.html").as_uri())
        width = await page.wait_for(
            "document.querySelector('#leaderboard') && document.documentElement.scrollWidth"
        )
        assert width <= 1400
        await page.open((report / "heatmaps" / f"{MODELS[0]}.chrfpp.svg").as_uri())
        title = await page.wait_for("document.querySelector('svg') && document.title || 'x'")
        assert title
        assert page.errors == []
        # Nothing but the pages' own files and what they inline: no network.
        assert page.requests
        assert all(url.startswith(("file://", "data:")) for url in page.requests)


# What shows that each page of the report drew itself.
DRAWN = {
    "leaderboard": "document.querySelectorAll('#leaderboard tbody tr').length",
    "results": "document.getElementById('app').dataset.rows",
    "sentences": "document.querySelectorAll('dl.sentence').length",
    "run": "document.querySelectorAll('pre').length",
}


@pytest.mark.parametrize("name", ["chromium", "firefox"])
def test_every_page_of_report_html_opens_at_bouquet_shape(
    shaped: Path, name: str, tmp_path: Path
) -> None:
    """report.html shows each page in a frame whose source is the page as a base64 data: URL,
    made by Snakemake's own function; Chromium opens none over 2 MiB."""
    browser.require(name)
    from snakemake.report.common import data_uri_from_file

    pages = sorted((shaped / "report").glob("*.html"))
    assert {path.stem.split("-")[0] for path in pages} == set(DRAWN)
    for path in pages:
        wrapper = tmp_path / path.name
        uri = data_uri_from_file(path)
        wrapper.write_text(
            # As wide as beside Snakemake's menu in a 1400-pixel window.
            f'<!doctype html><iframe src="{uri}" width="1050" height="900"></iframe>',
            encoding="utf-8",
        )
    asyncio.run(_report_html_pages(name, [tmp_path / path.name for path in pages]))


async def _report_html_pages(name: str, wrappers: list[Path]) -> None:
    opened = browser.chromium() if name == "chromium" else browser.firefox()
    async with opened as page:
        for wrapper in wrappers:
            await page.open(wrapper.as_uri())
            if isinstance(page, browser.FirefoxPage):
                frame: Any = 0
            else:
                frames = (
                    await page.wait_for("document.querySelector('iframe') !== null")
                    and await page.child_frames()
                )
                frame = frames[0]["id"]
            drawn = await page.wait_for(DRAWN[wrapper.stem.split("-")[0]], frame=frame)
            assert drawn, wrapper.name
            if wrapper.stem == "results":
                await _beside_the_menu(page, frame)


async def _beside_the_menu(page: Any, frame: Any) -> None:
    """Every model's column of every direction in view beside Snakemake's menu, and a click
    on a score's header puts the worst first."""
    await page.evaluate("document.querySelector('button[data-view=directions]').click()", frame)
    await page.wait_for("document.getElementById('app').dataset.view === 'directions'", frame)
    # Neither outside the frame nor hidden behind the edge of the table's scrolling box.
    outside = await page.wait_for(
        "document.querySelectorAll('.tabulator-row').length > 10 && JSON.stringify("
        "Array.from(document.querySelectorAll('.tabulator-col')).filter(c =>"
        " c.getBoundingClientRect().right > Math.min(window.innerWidth, document"
        ".querySelector('.tabulator-tableholder').getBoundingClientRect().right))"
        ".map(c => c.textContent))",
        frame,
    )
    assert json.loads(outside) == []
    await page.evaluate(
        f"{TABLE}.getColumn('m1').getElement().querySelector('.tabulator-col-title').click()",
        frame,
    )
    # MetricX: the highest first.
    first = await page.wait_for(
        f"(() => {{ const rows = {TABLE}.getData('active');"
        " return rows[0].m1 >= rows[1].m1 && rows[1].m1 >= rows[rows.length - 1].m1"
        " && JSON.stringify(rows.slice(0, 2).map(r => r.m1)); })()",
        frame,
    )
    assert first


@pytest.fixture(scope="module")
def server(shaped: Path) -> Iterator[str]:
    httpd = serve(shaped, 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


@contextlib.contextmanager
def browse_command(output_dir: Path) -> Iterator[str]:
    """`bouquet-eval browse` as users type it; yields the address it printed."""
    command = [sys.executable, "-m", "bouquet_eval", "browse", str(output_dir), "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            address = re.search(r"http://127\.0\.0\.1:\d+/", process.stdout.readline())
            assert address, "the command printed no address"
            yield address.group(0)
        finally:
            process.terminate()


def test_bouquet_eval_browse_serves_the_run(shaped: Path) -> None:
    """The command prints its address, then answers there."""
    with browse_command(shaped) as address, urllib.request.urlopen(address) as reply:
        assert reply.status == 200
        assert "<html" in reply.read().decode("utf-8").lower()


def _get(address: str, path: str, host: str | None = None, timeout: float = 10) -> int:
    """The status of a GET of `path`, sent with `host` as Host header when given."""
    request = urllib.request.Request(address.rstrip("/") + path)
    if host is not None:
        request.add_unredirected_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            reply.read()
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code


def test_browse_answers_only_its_own_host_names(shaped: Path) -> None:
    """A page on another site whose name resolves to 127.0.0.1 (DNS rebinding) reads nothing."""
    with browse_command(shaped) as address:
        port = urllib.parse.urlparse(address).port
        sentences = "/api/sentences?direction=eng_Latn-bre_Latn"
        for host in ("evil.example", f"attacker.com:{port}", "127.0.0.1.evil.example"):
            assert _get(address, sentences, host) == 421, host
            assert _get(address, "/", host) == 421, host
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            assert _get(address, sentences, host) == 200, host


IDLE_CONNECTIONS = 300
REQUESTS = 200


def test_browse_answers_while_idle_connections_are_held_open(shaped: Path) -> None:
    """Connections that send nothing take no turn from the requests of the page, and the
    server closes them rather than waiting on them for ever."""
    # Bounds on what must happen, never on how long it took: far above what it takes.
    patient = patience(IDLE_SECONDS + 60)
    with browse_command(shaped) as address:
        port = urllib.parse.urlparse(address).port
        assert port is not None
        idle = [
            socket.create_connection(("127.0.0.1", port), timeout=patient)
            for _ in range(IDLE_CONNECTIONS)
        ]
        try:
            paths = ["/api/directions", "/", "/api/sentences?direction=eng_Latn-bre_Latn"]
            with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
                statuses = list(
                    pool.map(
                        lambda n: _get(address, paths[n % len(paths)], timeout=patient),
                        range(REQUESTS),
                    )
                )
            # Every request answered while the idle connections were held; and the server
            # closes an idle one (an empty read), where a server that waits on it for ever
            # would let the read time out.
            assert statuses == [200] * REQUESTS
            assert idle[0].recv(1) == b""
        finally:
            for connection in idle:
                connection.close()


def test_the_browser_answers_a_direction_with_every_sentence(server: str, shaped: Path) -> None:
    # How fast it answers is measured by benchmarks/report_scale.py, not here.
    with urllib.request.urlopen(f"{server}/api/sentences?direction=eng_Latn-bre_Latn") as reply:
        answer = json.load(reply)
    assert answer["facets"] == ["domain", "register"]
    rows = answer["rows"]
    assert [r["uniq_id"] for r in rows] == [f"s{i}" for i in range(SENTENCES)]
    expected = pd.read_parquet(shaped / "alpha" / "scored_rows.parquet")
    mine = expected[(expected["src_lang"] == "eng_Latn") & (expected["tgt_lang"] == "bre_Latn")]
    assert [r["mt_text|alpha"] for r in rows] == mine["mt_text"].tolist()
    assert [r["chrfpp|echo"] is not None for r in rows] == [True] * SENTENCES
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{server}/api/sentences?direction=eng_Latn-xxx_Latn")
    assert refused.value.code == 400


def test_the_browser_page_filters_and_sets_models_side_by_side(server: str, chromium: None) -> None:
    asyncio.run(_browse(server))


async def _browse(server: str) -> None:
    async with browser.chromium() as page:
        await page.open(f"{server}/?direction=eng_Latn-bre_Latn")
        await page.wait_for("document.getElementById('app').dataset.ready === 'true'")
        shown = await page.evaluate("document.getElementById('app').dataset.shown")
        assert shown == str(SENTENCES)
        choose = (
            "(() => {{ const s = document.querySelector('select[data-control=\"{0}\"]');"
            " s.value = {1}; s.dispatchEvent(new Event('change')); return true; }})()"
        )
        await page.evaluate(choose.format("facet:domain", json.dumps("news")))
        assert await page.evaluate("document.getElementById('app').dataset.shown") == "1"
        await page.evaluate(choose.format("facet:domain", json.dumps("")))
        # It opens on the metric that ranks the leaderboard (MetricX here).
        metric = "document.querySelector('select[data-control=\"metric\"]').value"
        assert await page.evaluate(metric) == "metricx"
        await page.evaluate(choose.format("metric", json.dumps("chrfpp")))
        await page.evaluate(choose.format("versus", json.dumps("bravo")))
        # Each difference on one line.
        lines = await page.evaluate(
            "Array.from(document.querySelectorAll('td.difference')).map(cell => {"
            " const range = document.createRange(); range.selectNodeContents(cell);"
            " return range.getClientRects().length; })"
        )
        assert lines == [1] * SENTENCES
        header = await page.evaluate(
            "Array.from(document.querySelectorAll('table.sentences th')).map(h => h.textContent)"
        )
        assert header[-3:] == ["alpha (chrfpp)", "bravo (chrfpp)", "difference"]
        # Worst first for alpha: its chrF++ ascending.
        await page.evaluate(choose.format("versus", json.dumps("")))
        scores = await page.evaluate(
            "Array.from(document.querySelectorAll('table.sentences tbody tr'))"
            ".map(r => parseFloat(r.cells[5].querySelector('.score').textContent))"
        )
        assert scores == sorted(scores)
        assert page.errors == []
        assert all(url.startswith(server) for url in page.requests)


# --- xCOMET's error spans ------------------------------------------------------------------

PAYLOAD = "<img src=x onerror=window.injected=1>"
# The emoji is two UTF-16 units but one character of xCOMET's offsets: the marks after it
# land on the right words only if the page counts as Python does.
MARKED = f"\U0001f600 the cat {PAYLOAD} sat on the mat"


def span(text: str, start: int, end: int, severity: str = "minor") -> dict[str, Any]:
    return {"text": text, "start": start, "end": end, "severity": severity, "confidence": 0.5}


def test_error_spans_are_placed_by_their_offsets_or_else_by_their_text() -> None:
    spans = [
        span(" cat", 5, 9),  # xCOMET's text may carry the space before the word
        span(PAYLOAD, 0, 3, "critical"),  # offsets that do not hold the text: searched
        span("dog", 40, 43, "major"),  # nowhere in the translation: listed, not marked
    ]
    placed = placed_spans(MARKED, json.dumps(spans))
    marks = {p["text"]: (p["start"], p["end"]) for p in placed}
    assert MARKED[slice(*marks[" cat"])] == "cat"
    assert MARKED[slice(*marks[PAYLOAD])] == PAYLOAD
    assert marks["dog"] == (None, None)
    assert [p["severity"] for p in placed] == ["minor", "critical", "major"]
    # A span overlapping one already marked is listed alone; no spans, nothing to show.
    twice = placed_spans(MARKED, json.dumps([span("the cat", 2, 9), span("cat", 6, 9)]))
    assert [(p["start"], p["end"]) for p in twice] == [(2, 9), (None, None)]
    assert placed_spans(MARKED, None) == placed_spans(MARKED, "[]") == []


@pytest.fixture
def spanned(tmp_path: Path) -> Path:
    """Two models of three directions; alpha scored by xCOMET, its first sentence with spans."""
    directions = synthetic_directions(3)
    for number, model in enumerate(["alpha", "bravo"]):
        write_model_run(tmp_path / model, directions, SENTENCES, shift=-3.0 * number, seed=number)
    path = tmp_path / "alpha" / "scored_rows.parquet"
    rows = pd.read_parquet(path)
    rows["xcomet_error_spans"] = "[]"
    rows.loc[0, "mt_text"] = MARKED
    rows.loc[0, "xcomet_error_spans"] = json.dumps(
        [span(" cat", 5, 9), span(PAYLOAD, 0, 3, "critical"), span("mat", 34, 37, "major")]
    )
    rows.to_parquet(path, index=False, row_group_size=ROW_GROUP_ROWS)
    return tmp_path


def test_the_browser_marks_xcomets_error_spans_as_text(spanned: Path, chromium: None) -> None:
    asyncio.run(_spans(spanned))


async def _spans(output_dir: Path) -> None:
    httpd = serve(output_dir, 0)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    direction = synthetic_directions(1)[0].name
    try:
        async with browser.chromium() as page:
            await page.open(f"http://127.0.0.1:{httpd.server_port}/?direction={direction}")
            await page.wait_for("document.getElementById('app').dataset.ready === 'true'")
            marks = await page.evaluate(
                "Array.from(document.querySelectorAll('tr[data-id=\"s0\"] mark'))"
                ".map(m => [m.textContent, m.className, m.title])"
            )
            assert marks == [
                ["cat", "error minor", "minor error, confidence 0.500"],
                [PAYLOAD, "error critical", "critical error, confidence 0.500"],
                ["mat", "error major", "major error, confidence 0.500"],
            ]
            listed = await page.evaluate(
                "Array.from(document.querySelectorAll('tr[data-id=\"s0\"] ul.spans li'))"
                ".map(li => li.textContent)"
            )
            assert listed[1] == f"critical (0.500): {PAYLOAD}"
            # The payload is text: no image element, nothing ran, nothing fetched.
            assert await page.evaluate("document.querySelectorAll('#sentences img').length") == 0
            assert await page.evaluate("window.injected === undefined")
            # Only alpha's first sentence has spans; bravo's cells show its text unmarked.
            assert await page.evaluate("document.querySelectorAll('mark').length") == 3
            # Kept where BOUQUET_EVAL_SHOTS names a folder, to look at.
            shots = Path(os.environ.get("BOUQUET_EVAL_SHOTS", output_dir))
            await page.screenshot(shots / "spans.png")
            assert page.errors == []
            assert all(url.startswith("http://127.0.0.1") for url in page.requests)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_leaderboard_fits_a_1400_pixel_window(tmp_path: Path, chromium: None) -> None:
    """Ten models with long names and six metrics: no part of the table outside the window."""
    from bouquet_eval.results.leaderboard import ModelResults, build_leaderboard
    from bouquet_eval.results.pages import leaderboard_page

    metrics = ["chrfpp", "metricx", "bleu", "ter", "glotlid_score", "glotlid_x_metricx"]
    results = []
    for number in range(10):
        model = synthetic_model(f"organisation/model-{number}-instruct", -number, 1, number)
        rows = model.rows.assign(
            bleu=model.rows["chrfpp"] * 0.6,
            ter=100 - model.rows["chrfpp"],
            glotlid_score=0.9,
            glotlid_x_metricx=model.rows["chrfpp"] / 100,
        )
        scores = (
            rows.groupby(["src_lang", "tgt_lang"])
            .agg(n_sentences=("uniq_id", "size"), **{c: (c, "mean") for c in metrics})
            .reset_index()
        )
        results.append(ModelResults(model.name, scores, rows))
    board = build_leaderboard(results, metrics, {"metricx", "ter"}, SMALL)
    page_path = tmp_path / "leaderboard.html"
    page_path.write_text(leaderboard_page(board, {"metricx", "ter"}), encoding="utf-8")
    asyncio.run(_fits(page_path))


async def _fits(page_path: Path) -> None:
    async with browser.chromium() as page:
        await page.open(page_path.as_uri())
        right = await page.wait_for(
            "document.querySelector('#leaderboard') &&"
            " document.querySelector('#leaderboard').getBoundingClientRect().right"
        )
        assert right <= 1400
        assert await page.evaluate("document.documentElement.scrollWidth") <= 1400
