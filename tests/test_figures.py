"""The leaderboard job's figures, written as SVG directly (`results.svgplot`): what each shows,
read back from its elements through its own axis, against the numbers it was drawn from."""

from __future__ import annotations

import math
from xml.etree import ElementTree

import numpy as np
import pandas as pd
import pytest

from bouquet_eval.results.extracts import violin_of
from bouquet_eval.results.figures import comparison, distributions, forest_plot, timing_figure
from bouquet_eval.results.pages import leaderboard_page
from bouquet_eval.results.svgplot import BoxStats, nice_ticks, tick_label

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script> & co"


def parse(svg: str) -> ElementTree.Element:
    """The figure as XML: it fails on any text not escaped."""
    assert svg.startswith("<svg ") and svg.endswith("</svg>\n")
    return ElementTree.fromstring(svg)


def tagged(element: ElementTree.Element, tag: str, css: str | None = None) -> list:
    return [e for e in element.iter(SVG + tag) if css is None or e.get("class") == css]


def panels(root: ElementTree.Element) -> list[ElementTree.Element]:
    return tagged(root, "g", "panel")


def to_value(panel: ElementTree.Element):
    """A pixel x's value on the panel's axis, from its tick labels' positions (as a reader
    reads the figure), checked against the axis the panel records."""
    ticks = tagged(panel, "text", "tick")
    assert len(ticks) >= 2
    step = float(ticks[1].get("data-value")) - float(ticks[0].get("data-value"))
    values = [float(t.text.replace("\N{MINUS SIGN}", "-")) for t in ticks]
    assert [tick_label(v, step) for v in values] == [t.text for t in ticks]
    xs = [float(t.get("x")) for t in ticks]
    (x0, x1), (v0, v1) = (xs[0], xs[-1]), (values[0], values[-1])
    # Evenly spaced: the axis is linear.
    assert np.allclose(np.diff(xs), (x1 - x0) / (len(xs) - 1), atol=0.02)
    return lambda x: v0 + (float(x) - x0) * (v1 - v0) / (x1 - x0), (v1 - v0) / (x1 - x0)


def row_labels(root: ElementTree.Element) -> list[str]:
    return ["\n".join(span.text or "" for span in label) for label in tagged(root, "text", "row")]


def row_centres(root: ElementTree.Element) -> list[float]:
    return [float(label.get("y")) for label in tagged(root, "text", "row")]


def board_of(means: list[float], models: list[str]) -> pd.DataFrame:
    board = pd.DataFrame(
        {
            "model": models,
            "chrfpp": means,
            "chrfpp_ci_low": [m - 1.2 - i / 10 for i, m in enumerate(means)],
            "chrfpp_ci_high": [m + 0.8 + i / 10 for i, m in enumerate(means)],
            "rank": [float(i + 1) for i in range(len(means))],
            "cluster": [1.0, 1.0, 2.0][: len(means)],
            "p_vs_best": [np.nan, 0.0612, 0.00123][: len(means)],
            "n_directions": [3] * len(means),
            "n_sentences": [30] * len(means),
            "bound": [""] * len(means),
            "note": [""] * len(means),
        }
    )
    for group in ("into_english", "out_of_english", "without_english"):
        board[f"chrfpp_{group}"] = board["chrfpp"]
    board.attrs = {"primary": "chrfpp"}
    return board


MODELS = ["best", HOSTILE, "third\nline"]


@pytest.mark.parametrize(
    ("low", "high", "most"),
    [(0, 100, 9), (-0.05, 1.05, 9), (35.9, 51.6, 9), (-43.1, 31.0, 4), (0.0012, 0.0019, 5),
     (3, 12345, 9), (-1e-3, 2e-3, 2), (7, 8, 1), (-1e-7, 3e-7, 6), (0.0010001, 0.0010004, 6)],
)  # fmt: skip
def test_ticks_are_matplotlibs_choice_of_steps(low: float, high: float, most: int) -> None:
    """`nice_ticks` picks the ticks matplotlib's MaxNLocator picks with steps 1, 2, 5 and 10."""
    from matplotlib.ticker import MaxNLocator

    ours = nice_ticks(low, high, most)
    theirs = MaxNLocator(nbins=most, steps=[1, 2, 5, 10]).tick_values(low, high)
    theirs = [t for t in theirs if low - 1e-12 <= t <= high + 1e-12]
    assert len(ours) == len(theirs), (ours, theirs)
    assert np.allclose(ours, theirs, rtol=0, atol=1e-12 * max(abs(low), abs(high))), ours
    assert len(ours) <= most + 1
    step = ours[1] - ours[0]
    # Every label tells its tick.
    assert [float(tick_label(t, step).replace("\N{MINUS SIGN}", "-")) for t in ours] == ours


def test_box_statistics_are_matplotlibs() -> None:
    """Quartiles, whiskers (the furthest values within 1.5 IQR) and fliers as matplotlib's
    `boxplot_stats` computes them."""
    from matplotlib import cbook

    rng = np.random.default_rng(3)
    for values in (
        np.r_[rng.normal(10, 2, 200), [30.0, 31.5, -9.0]],
        np.array([1.0, 2.0, 3.0, 4.0, 100.0]),
        np.array([5.0]),
        np.array([2.0, 2.0, 2.0, 9.0]),
    ):
        ours = BoxStats.of(values)
        (theirs,) = cbook.boxplot_stats(values, whis=1.5)
        assert (ours.q1, ours.median, ours.q3) == (theirs["q1"], theirs["med"], theirs["q3"])
        assert (ours.low, ours.high) == (theirs["whislo"], theirs["whishi"])
        assert sorted(ours.fliers) == sorted(theirs["fliers"])


def test_forest_plot_places_each_mean_and_interval_on_its_axis() -> None:
    board = board_of([50.25, 46.125, 42.5], MODELS)
    svg = forest_plot(board, set())
    root = parse(svg)
    assert row_labels(root) == MODELS  # in leaderboard order, the hostile name as text
    assert "<script>" not in svg and HOSTILE not in svg
    (panel,) = panels(root)
    value, per_pixel = to_value(panel)
    tolerance = 0.02 * abs(per_pixel)  # coordinates and ticks are written to 0.01 px
    intervals = tagged(root, "g", "interval")
    centres = row_centres(root)
    assert len(intervals) == len(board)
    for record, interval, centre in zip(board.to_dict("records"), intervals, centres, strict=True):
        (point,) = tagged(interval, "circle", "point")
        assert abs(value(point.get("cx")) - record["chrfpp"]) < tolerance
        assert float(point.get("cy")) == centre  # on its model's row
        ends = sorted(
            {float(line.get(k)) for line in tagged(interval, "line") for k in ("x1", "x2")}
        )
        assert [value(x) for x in ends] == pytest.approx(
            [record["chrfpp_ci_low"], record["chrfpp_ci_high"]], abs=tolerance
        )
        assert interval.find(SVG + "title").text.startswith(f"{record['model']}: ")
    assert tagged(root, "text", "label")[0].text == (
        "chrfpp, macro mean with 95% interval (higher is better)"
    )
    # The leaderboard page holds it as an element of its own, as it is.
    page = leaderboard_page(board, set())
    assert page.count("<svg ") == 1 and svg in page
    assert forest_plot(board, set()) == svg  # the same bytes every time


def test_distributions_draw_each_models_violin_from_its_statistics() -> None:
    rng = np.random.default_rng(0)
    samples = {
        "best": rng.normal(60, 10, 4000),
        HOSTILE: rng.normal(40, 15, 4000),
        "unscored": None,
    }
    violins = {
        name: None if values is None else violin_of(pd.Series(values))
        for name, values in samples.items()
    }
    svg = distributions(violins, "chrfpp", set())
    root = parse(svg)
    assert tagged(root, "text", "title")[0].text == "Distribution of sentence scores: chrfpp"
    assert tagged(root, "text", "label")[0].text == "chrfpp per sentence (higher is better)"
    assert row_labels(root) == list(samples)
    (panel,) = panels(root)
    value, per_pixel = to_value(panel)
    tolerance = 0.02 * abs(per_pixel)
    drawn = tagged(root, "g", "violin")
    assert len(drawn) == 2  # none for the model without scores
    centres = row_centres(root)
    for row, (name, shape) in enumerate(zip(samples, drawn, strict=False)):
        stats = violins[name]
        assert stats is not None
        points = [p.split(",") for p in shape.find(SVG + "polygon").get("points").split()]
        xs = [value(x) for x, _ in points]
        ys = np.array([float(y) for _, y in points])
        assert min(xs) == pytest.approx(stats["min"], abs=tolerance)
        assert max(xs) == pytest.approx(stats["max"], abs=tolerance)
        # Symmetric about its row, a quarter of a row high at its widest, widest where the
        # density peaks.
        assert np.allclose(ys.min() + ys.max(), 2 * centres[row], atol=0.02)
        widest = int(np.argmin(ys))
        assert xs[widest] == pytest.approx(stats["coords"][np.argmax(stats["vals"])], abs=tolerance)
        (median,) = tagged(shape, "line", "median")
        assert value(median.get("x1")) == pytest.approx(stats["median"], abs=tolerance)
    means = tagged(root, "polygon", "mean")
    assert [float(m.get("data-value")) for m in means] == [
        v["mean"] for v in violins.values() if v is not None
    ]
    for mean in means:
        x = float(mean.get("points").split()[0].split(",")[0])
        assert value(x) == pytest.approx(float(mean.get("data-value")), abs=tolerance)
    assert [t.text for t in tagged(root, "text") if t.text == "mean"] == ["mean"]  # its legend
    assert distributions(violins, "chrfpp", set()) == svg
    # No model scored: the rows and axis still, no legend.
    empty = parse(distributions({"a": None}, "metricx", {"metricx"}))
    assert row_labels(empty) == ["a"] and not tagged(empty, "g", "legend")


def scores_of(deltas: dict[str, list[float]]) -> dict[str, pd.DataFrame]:
    directions = [("eng_Latn", "fra_Latn"), ("fra_Latn", "eng_Latn"), ("deu_Latn", "fra_Latn")]
    frames = {}
    for model, values in deltas.items():
        frame = pd.DataFrame(directions, columns=["src_lang", "tgt_lang"])
        frame["chrfpp"] = [50 + v for v in values]
        frames[model] = frame
    return frames


def test_comparison_shows_every_directions_difference_from_the_best() -> None:
    deltas: dict[str, list[float]] = {
        "best": [0.0, 0.0, 0.0],
        HOSTILE: [-4.0, 1.5, np.nan],
        "third\nline": [-8.0, -2.0, -5.0],
    }
    board = board_of([50.0, 49.0, 45.0], list(deltas))
    svg = comparison(scores_of(deltas), board, set())
    root = parse(svg)
    assert tagged(root, "text", "title")[0].text == "Paired comparison with the best model, best"
    assert row_labels(root) == [
        f"{HOSTILE}\np = 0.0612, cluster 1",
        "third\nline\np = 0.00123, cluster 2",
    ]
    (panel,) = panels(root)
    value, per_pixel = to_value(panel)
    tolerance = 0.02 * abs(per_pixel)
    strips = tagged(root, "g", "strip")
    centres = row_centres(root)
    others = list(deltas.values())[1:]
    for values, strip, centre in zip(others, strips, centres, strict=True):
        shown = [v for v in values if not math.isnan(v)]
        dots = tagged(strip, "circle")
        assert [value(d.get("cx")) for d in dots] == pytest.approx(shown, abs=tolerance)
        # Jittered within 0.15 of a row around the row's centre.
        assert all(abs(float(d.get("cy")) - centre) <= 0.15 * 70 + 0.01 for d in dots)
        assert [d.find(SVG + "title").text.split(": ")[1] for d in dots] == [
            f"{v:.2f}" for v in shown
        ]
    bars = tagged(root, "line", "mean")
    assert [float(b.get("data-value")) for b in bars] == [-1.25, -5.0]
    assert [value(b.get("x1")) for b in bars] == pytest.approx([-1.25, -5.0], abs=tolerance)
    assert comparison(scores_of(deltas), board, set()) == svg  # the jitter is seeded
    alone = parse(comparison(scores_of(deltas), board.iloc[:1], set()))
    assert [t.text for t in tagged(alone, "text")] == ["Only one ranked model: nothing to compare."]


def test_timing_leaves_out_rates_nobody_recorded() -> None:
    timing = pd.DataFrame({"seconds": [2.0, 3.0], "sentences_per_second": [4.0, 5.0]})
    root = parse(timing_figure({"a": timing, "b": timing}, {"a": 0, "b": 0}))
    assert [t.text for t in tagged(root, "text", "label")] == ["sentences/s per direction"]
    root = parse(timing_figure({"a": timing, "b": timing}, {"a": 1, "b": 0}))
    assert [t.text for t in tagged(root, "text", "label")] == [
        "sentences/s per direction",
        "GPU-seconds per direction",
    ]
    # b used no GPU: its GPU-seconds are not data.
    notes = [t.text for t in tagged(panels(root)[1], "text", "note")]
    assert notes == ["not recorded"]


def test_timing_boxes_are_the_quartiles_and_whiskers_of_each_models_rates() -> None:
    rng = np.random.default_rng(7)
    rates = np.r_[rng.lognormal(3, 0.3, 120), [200.0, 0.5]]
    timing = {
        "fast": pd.DataFrame({"seconds": rates / 2, "sentences_per_second": rates}),
        HOSTILE: pd.DataFrame({"seconds": rates, "sentences_per_second": rates / 3}),
    }
    svg = timing_figure(timing, {"fast": 1, HOSTILE: 2})
    root = parse(svg)
    assert tagged(root, "text", "title")[0].text == "Translation speed per direction"
    assert row_labels(root) == ["fast", HOSTILE]  # on the first panel only
    speed, gpu = panels(root)
    for panel, expected in (
        (speed, [rates, rates / 3]),
        (gpu, [rates / 2 * 1, rates * 2]),
    ):
        value, per_pixel = to_value(panel)
        tolerance = 0.02 * abs(per_pixel)
        boxes = tagged(panel, "g", "box")
        for box, values in zip(boxes, expected, strict=True):
            stats = BoxStats.of(values)
            rect = box.find(SVG + "rect")
            left = float(rect.get("x"))
            assert value(left) == pytest.approx(stats.q1, abs=tolerance)
            assert value(left + float(rect.get("width"))) == pytest.approx(stats.q3, abs=tolerance)
            (median,) = tagged(box, "line", "median")
            assert value(median.get("x1")) == pytest.approx(stats.median, abs=tolerance)
            ends = sorted({float(line.get("x1")) for line in tagged(box, "line")})
            assert value(ends[0]) == pytest.approx(stats.low, abs=tolerance)
            assert value(ends[-1]) == pytest.approx(stats.high, abs=tolerance)
            fliers = sorted(value(c.get("cx")) for c in tagged(box, "circle", "flier"))
            assert fliers == pytest.approx(sorted(stats.fliers), abs=tolerance)
            assert len(fliers) >= 2  # the two planted outliers at least
    assert timing_figure(timing, {"fast": 1, HOSTILE: 2}) == svg
