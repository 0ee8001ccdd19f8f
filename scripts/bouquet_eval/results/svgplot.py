"""Charts of models (rows, top to bottom) against a numeric axis, written as SVG directly.

The leaderboard job's figures (distributions, comparison, timing, the forest plot) are such
charts: a row per model, an x axis with its ticks, grid and label, and a few kinds of marks
(violins, box plots, points, intervals). Drawn through matplotlib they cost the job more than
half its CPU time: importing it and laying out each figure, measuring every label. Written
directly, as `heatmaps` writes the heatmaps, they are a few hundred elements of text whose
layout is fixed here: the same results give the same bytes, every text escaped, a tooltip on
each mark. The marks follow matplotlib's defaults (`violin`, `boxplot`, `errorbar`, `scatter`),
so the figures read as they did, at the sizes a browser showed its figures at (a point is 4/3
px: a 7.5 in figure 720 px wide, its 9 pt text 12 px).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

FONT = "DejaVu Sans, Arial, sans-serif"
FONT_SIZE = 12
"""Tick and row labels (matplotlib's 9 pt)."""
CHARACTER_WIDTH = 0.6
"""A character's width, as a share of its font size: labels are laid out from their lengths
(no font is measured, so nothing depends on the fonts installed)."""
CYCLE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
)  # fmt: skip
"""matplotlib's default colours (tab10), in its order."""
BLUE, ORANGE = CYCLE[0], CYCLE[1]
GRID = "#e7e7e7"
"""The x grid's lines: matplotlib's grey #b0b0b0 at 30% opacity on white."""
WIDTH = 720
"""A figure's width (matplotlib's 7.5 in, as the report's figures were)."""
PANEL_WIDTH = 200
"""The least width of a panel, however long the row labels."""


def escape(text: object) -> str:
    """Text for an SVG element or attribute: `&`, `<`, `>` and quotes escaped."""
    return html.escape(str(text))


def number(value: float) -> str:
    """A coordinate, to a hundredth of a pixel: the same results, the same bytes."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def text_width(text: str, size: float) -> float:
    """About how wide `text` is at font `size` (its longest line)."""
    return max((len(line) for line in text.split("\n")), default=0) * size * CHARACTER_WIDTH


def svg_open(width: float, height: float) -> list[str]:
    """The start of an SVG document of `width` x `height` px on white."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{number(width)}" '
        f'height="{number(height)}" viewBox="0 0 {number(width)} {number(height)}" '
        f'font-family="{FONT}">',
        f'<rect width="{number(width)}" height="{number(height)}" fill="white"/>',
    ]


def svg_close(parts: list[str]) -> str:
    return "\n".join([*parts, "</svg>"]) + "\n"


def text(x: float, y: float, content: str, size: float = FONT_SIZE, **attributes: str) -> str:
    """A line of text at (`x`, `y`), its baseline; `attributes` as SVG's (`text_anchor` for
    `text-anchor`, `class_` for `class`)."""
    extra = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{escape(v)}"' for key, v in attributes.items()
    )
    return (
        f'<text x="{number(x)}" y="{number(y)}" font-size="{number(size)}"{extra}>'
        f"{escape(content)}</text>"
    )


def tooltip(tip: str | None) -> str:
    return f"<title>{escape(tip)}</title>" if tip else ""


# Why by hand: the tick positions are the one piece of matplotlib's layout the figures need,
# and its locator comes only with its import, the cost the figures shed.
TICK_STEPS = (1.0, 2.0, 5.0, 10.0)


def nice_ticks(low: float, high: float, most: int) -> list[float]:
    """At most `most` + 1 ticks within [`low`, `high`], a step of 1, 2 or 5 times a power of
    ten apart (as matplotlib's MaxNLocator chooses them): the smallest such step that leaves
    `most` intervals or fewer."""
    span = high - low
    if not span > 0 or not math.isfinite(span):
        return [low] if math.isfinite(low) else []
    raw = span / max(most, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(s * magnitude for s in TICK_STEPS if s * magnitude >= raw * (1 - 1e-9))
    first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
    decimals = tick_decimals(step)
    return [round(k * step, decimals) for k in range(first, last + 1)]


def tick_decimals(step: float) -> int:
    """The decimals that write every multiple of a 1-2-5 `step` exactly."""
    return max(0, -math.floor(math.log10(step) + 1e-9))


def tick_label(value: float, step: float) -> str:
    """A tick's value with the decimals its step needs (in exponent notation below 1e-5, with
    the digits it needs); negative with a minus sign (U+2212), as matplotlib writes it."""
    decimals = tick_decimals(step)
    if decimals <= 5:
        written = f"{abs(value):.{decimals}f}"
    elif value == 0:
        written = "0"
    else:
        digits = math.floor(math.log10(abs(value))) - math.floor(math.log10(step) + 1e-9) + 1
        written = f"{abs(value):.{max(digits, 1)}g}"
    return f"\N{MINUS SIGN}{written}" if value < 0 and float(written) != 0 else written


def view_limits(values: Sequence[float]) -> tuple[float, float]:
    """The x axis's range: the values' with 5% of it on either side (matplotlib's margins);
    (0, 1) where there is none; a single value with room around it."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    low, high = min(finite), max(finite)
    if high - low <= 1e-12 * max(abs(low), abs(high), 1.0):
        pad = abs(low) * 0.05 or 0.5
        return low - pad, high + pad
    margin = 0.05 * (high - low)
    return low - margin, high + margin


@dataclass(frozen=True)
class Axis:
    """A value's x in pixels: [`low`, `high`] onto [`left`, `right`]."""

    low: float
    high: float
    left: float
    right: float

    def x(self, value: float) -> float:
        return self.left + (value - self.low) / (self.high - self.low) * (self.right - self.left)


@dataclass(frozen=True)
class Place:
    """Where a mark is drawn: its panel's axis, and the centre and height of each row."""

    axis: Axis
    top: float
    row_height: float

    def y(self, row: float) -> float:
        """The y in pixels of a position in rows (row r's centre at r)."""
        return self.top + (row + 0.5) * self.row_height


class Mark(Protocol):
    """A thing a panel draws across its rows (a violin, a box, an interval, ...)."""

    def values(self) -> Sequence[float]:
        """The x values it needs the axis to show."""

    def draw(self, place: Place) -> list[str]: ...


def _line(x1: float, y1: float, x2: float, y2: float, colour: str, width: float = 1.0) -> str:
    return (
        f'<line x1="{number(x1)}" y1="{number(y1)}" x2="{number(x2)}" y2="{number(y2)}" '
        f'stroke="{colour}" stroke-width="{number(width)}"/>'
    )


VIOLIN_HALF_WIDTH = 0.25
"""A violin's widest point from its centre, in rows (matplotlib's default widths=0.5, half)."""
TICK_HALF = 0.125
"""Median, extremes and box caps from the centre, in rows (a quarter of widths=0.5)."""


@dataclass(frozen=True)
class Violin:
    """A horizontal violin at `row` from matplotlib's violin statistics (`extracts.violin_of`):
    the density `vals` at `coords`, its widest `VIOLIN_HALF_WIDTH`; the extremes joined by a
    line, ticked at its ends and at the median."""

    row: int
    stats: dict[str, Any]
    tip: str

    def values(self) -> Sequence[float]:
        return [float(self.stats["min"]), float(self.stats["max"])]

    def draw(self, place: Place) -> list[str]:
        coords = np.asarray(self.stats["coords"], dtype=float)
        vals = np.asarray(self.stats["vals"], dtype=float)
        peak = vals.max() if vals.size and vals.max() > 0 else 1.0
        half = vals / peak * VIOLIN_HALF_WIDTH * place.row_height
        centre = place.y(self.row)
        xs = [place.axis.x(c) for c in coords]
        outline = [(x, centre - h) for x, h in zip(xs, half, strict=True)]
        outline += [(x, centre + h) for x, h in zip(xs[::-1], half[::-1], strict=True)]
        points = " ".join(f"{number(x)},{number(y)}" for x, y in outline)
        tick = TICK_HALF * place.row_height
        low, high = place.axis.x(self.stats["min"]), place.axis.x(self.stats["max"])
        median = place.axis.x(self.stats["median"])
        return [
            f'<g class="violin">{tooltip(self.tip)}'
            f'<polygon points="{points}" fill="{BLUE}" fill-opacity="0.3"/>',
            _line(low, centre, high, centre, BLUE, 1.5),
            _line(low, centre - tick, low, centre + tick, BLUE, 1.5),
            _line(high, centre - tick, high, centre + tick, BLUE, 1.5),
            f'<line class="median" x1="{number(median)}" y1="{number(centre - tick)}" '
            f'x2="{number(median)}" y2="{number(centre + tick)}" stroke="{BLUE}" '
            'stroke-width="1.5"/></g>',
        ]


def diamond(x: float, y: float, half: float) -> str:
    return (
        f"{number(x)},{number(y - half)} {number(x + half)},{number(y)} "
        f"{number(x)},{number(y + half)} {number(x - half)},{number(y)}"
    )


@dataclass(frozen=True)
class MeanDiamond:
    """A black diamond at a row's mean (matplotlib's marker "D")."""

    row: int
    mean: float
    tip: str

    def values(self) -> Sequence[float]:
        return [self.mean]

    def draw(self, place: Place) -> list[str]:
        x, y = place.axis.x(self.mean), place.y(self.row)
        return [
            f'<polygon class="mean" data-value="{self.mean!r}" points="{diamond(x, y, 4)}" '
            f'fill="black">{tooltip(self.tip)}</polygon>'
        ]


@dataclass(frozen=True)
class Strip:
    """Points of a row scattered across it by `offsets` (in rows), in `colour`, each with its
    tooltip; a black bar at their mean."""

    row: int
    points: Sequence[float]
    offsets: Sequence[float]
    tips: Sequence[str]
    colour: str
    mean_tip: str

    def values(self) -> Sequence[float]:
        return list(self.points)

    def draw(self, place: Place) -> list[str]:
        centre = place.y(self.row)
        parts = [f'<g class="strip" fill="{self.colour}" fill-opacity="0.5">']
        for value, offset, tip in zip(self.points, self.offsets, self.tips, strict=True):
            parts.append(
                f'<circle cx="{number(place.axis.x(value))}" '
                f'cy="{number(centre + offset * place.row_height)}" r="2">'
                f"{tooltip(tip)}</circle>"
            )
        parts.append("</g>")
        if len(self.points):
            mean = float(np.mean(self.points))
            x, reach = place.axis.x(mean), 0.3 * place.row_height
            parts.append(
                f'<line class="mean" data-value="{mean!r}" x1="{number(x)}" '
                f'y1="{number(centre - reach)}" x2="{number(x)}" y2="{number(centre + reach)}" '
                f'stroke="black" stroke-width="1.5">{tooltip(self.mean_tip)}</line>'
            )
        return parts


@dataclass(frozen=True)
class BoxStats:
    """matplotlib's box plot statistics (`cbook.boxplot_stats`, whis=1.5): quartiles, the
    whiskers at the furthest values within 1.5 interquartile ranges of the box, the values
    beyond them."""

    q1: float
    median: float
    q3: float
    low: float
    high: float
    fliers: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> BoxStats:
        q1, median, q3 = np.percentile(values, [25, 50, 75])
        reach = 1.5 * (q3 - q1)
        within_low = values[values >= q1 - reach]
        within_high = values[values <= q3 + reach]
        low = min(float(within_low.min()), float(q1)) if within_low.size else float(q1)
        high = max(float(within_high.max()), float(q3)) if within_high.size else float(q3)
        fliers = values[(values < low) | (values > high)]
        return cls(float(q1), float(median), float(q3), low, high, fliers)


@dataclass(frozen=True)
class Box:
    """A horizontal box plot at `row` (matplotlib's default look: the box from the first to
    the third quartile half a row high, the median in orange, whiskers with caps, fliers as
    open circles)."""

    row: int
    stats: BoxStats
    tip: str

    def values(self) -> Sequence[float]:
        return [self.stats.low, self.stats.high, *map(float, self.stats.fliers)]

    def draw(self, place: Place) -> list[str]:
        s, x = self.stats, place.axis.x
        centre, half, cap = place.y(self.row), 0.25 * place.row_height, TICK_HALF * place.row_height
        parts = [
            f'<g class="box">{tooltip(self.tip)}'
            f'<rect x="{number(x(s.q1))}" y="{number(centre - half)}" '
            f'width="{number(x(s.q3) - x(s.q1))}" height="{number(2 * half)}" fill="none" '
            'stroke="black" stroke-width="1"/>',
            _line(x(s.low), centre, x(s.q1), centre, "black"),
            _line(x(s.q3), centre, x(s.high), centre, "black"),
            _line(x(s.low), centre - cap, x(s.low), centre + cap, "black"),
            _line(x(s.high), centre - cap, x(s.high), centre + cap, "black"),
            f'<line class="median" x1="{number(x(s.median))}" y1="{number(centre - half)}" '
            f'x2="{number(x(s.median))}" y2="{number(centre + half)}" stroke="{ORANGE}" '
            'stroke-width="1.5"/>',
        ]
        parts += [
            f'<circle class="flier" cx="{number(x(float(v)))}" cy="{number(centre)}" r="3" '
            'fill="none" stroke="black" stroke-width="1"/>'
            for v in s.fliers
        ]
        parts.append("</g>")
        return parts


@dataclass(frozen=True)
class Interval:
    """A point with its interval as an error bar with caps (matplotlib's `errorbar`, fmt "o",
    capsize 3)."""

    row: int
    value: float
    low: float
    high: float
    tip: str

    def values(self) -> Sequence[float]:
        return [self.value, self.low, self.high]

    def draw(self, place: Place) -> list[str]:
        parts = [f'<g class="interval">{tooltip(self.tip)}']
        y, x = place.y(self.row), place.axis.x
        if math.isfinite(self.low) and math.isfinite(self.high):
            parts += [
                _line(x(self.low), y, x(self.high), y, BLUE, 1.5),
                _line(x(self.low), y - 4, x(self.low), y + 4, BLUE, 1.5),
                _line(x(self.high), y - 4, x(self.high), y + 4, BLUE, 1.5),
            ]
        if math.isfinite(self.value):
            parts.append(
                f'<circle class="point" cx="{number(x(self.value))}" cy="{number(y)}" r="4" '
                f'fill="{BLUE}"/>'
            )
        parts.append("</g>")
        return parts


@dataclass(frozen=True)
class RowNote:
    """A grey note at the left of a row, where it has nothing to show ("not recorded")."""

    row: int
    note: str

    def values(self) -> Sequence[float]:
        return []

    def draw(self, place: Place) -> list[str]:
        left = place.axis.left + 0.02 * (place.axis.right - place.axis.left)
        return [text(left, place.y(self.row) + 3, self.note, 9, fill="grey", class_="note")]


@dataclass
class Panel:
    """One x axis across the chart's rows, with its label and marks."""

    label: str
    marks: list[Mark] = field(default_factory=list)
    zero_line: bool = False
    """A grey vertical line at 0 across every row (0 then within the axis)."""

    def add(self, mark: Mark) -> None:
        self.marks.append(mark)


@dataclass
class Chart:
    """Rows of categories (their labels, one or more lines each) and one or more panels side by
    side, each an x axis across them; `title` above."""

    rows: Sequence[str]
    title: str
    row_height: float
    width: float = WIDTH
    """The whole chart's, but that each panel keeps at least `PANEL_WIDTH` px."""
    label_size: float = FONT_SIZE
    panels: list[Panel] = field(default_factory=list)
    note: str | None = None
    """A note written in the middle of a chart that has nothing else to show."""
    legend: str | None = None
    """A legend entry for the mean's diamond, at the right of the title's line: above the
    marks, so that it hides none."""

    def panel(self, label: str) -> Panel:
        self.panels.append(Panel(label))
        return self.panels[-1]

    def svg(self) -> str:
        if self.note is not None:
            return self._note_only()
        lines = max((len(label.split("\n")) for label in self.rows), default=1)
        longest = max((text_width(label, self.label_size) for label in self.rows), default=0)
        left = longest + 16
        top = 34 if self.title or self.legend else 10
        plot_height = max(len(self.rows), 1) * max(self.row_height, lines * self.label_size * 1.3)
        row_height = plot_height / max(len(self.rows), 1)
        count, gap = max(len(self.panels), 1), 24
        panel_width = max((self.width - left - 20 - gap * (count - 1)) / count, PANEL_WIDTH)
        width = left + count * (panel_width + gap) - gap + 20
        height = top + plot_height + 52
        parts = svg_open(width, height)
        legend = _legend(width - 20, 22, self.legend) if self.legend else []
        if self.title:
            # Centred, or as far right as the legend leaves room for.
            half = text_width(self.title, 14) / 2
            room = width - 20 - (_legend_width(self.legend) + 16 if self.legend else 0)
            centre = max(min(width / 2, room - half), half + 4)
            parts.append(text(centre, 22, self.title, 14, text_anchor="middle", class_="title"))
        parts += legend
        for index, panel in enumerate(self.panels):
            x0 = left + index * (panel_width + gap)
            place = Place(Axis(*view_limits(_values(panel)), x0, x0 + panel_width), top, row_height)
            parts += self._panel(panel, place, plot_height, labelled=index == 0)
        return svg_close(parts)

    def _panel(self, panel: Panel, place: Place, plot_height: float, labelled: bool) -> list[str]:
        axis, top = place.axis, place.top
        bottom = top + plot_height
        width = axis.right - axis.left
        parts = [f'<g class="panel" data-low="{axis.low!r}" data-high="{axis.high!r}">']
        parts += _x_ticks(axis, top, bottom)
        if panel.zero_line:
            parts.append(_line(axis.x(0.0), top, axis.x(0.0), bottom, "grey", 0.8))
        for row, label in enumerate(self.rows):
            y = place.y(row)
            parts.append(_line(axis.left - 3.5, y, axis.left, y, "black", 0.8))
            if labelled:
                parts.append(_row_label(axis.left - 6, y, label, self.label_size))
        for mark in panel.marks:
            parts += mark.draw(place)
        parts.append(
            f'<rect x="{number(axis.left)}" y="{number(top)}" width="{number(width)}" '
            f'height="{number(plot_height)}" fill="none" stroke="black" stroke-width="0.8"/>'
        )
        parts.append(
            text(
                axis.left + width / 2,
                bottom + 40,
                panel.label,
                text_anchor="middle",
                class_="label",
            )
        )
        parts.append("</g>")
        return parts

    def _note_only(self) -> str:
        height = max(self.row_height * len(self.rows), 240)
        parts = svg_open(self.width, height)
        parts.append(
            text(
                self.width / 2, height / 2 + 4, str(self.note), text_anchor="middle", class_="note"
            )
        )
        return svg_close(parts)


def _values(panel: Panel) -> list[float]:
    return [float(v) for mark in panel.marks for v in mark.values()] + [0.0] * panel.zero_line


def _x_ticks(axis: Axis, top: float, bottom: float) -> list[str]:
    """The x axis's ticks, labels and light grid: as many as leave each label room."""
    width = axis.right - axis.left
    most = 9
    while True:
        ticks = nice_ticks(axis.low, axis.high, most)
        step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
        labels = [tick_label(t, step) for t in ticks]
        room = width / (axis.high - axis.low) * step
        widest = max((text_width(label, FONT_SIZE) for label in labels), default=0)
        if most == 1 or room >= widest + 8:
            break
        most -= 1
    parts = ['<g class="x-ticks">']
    for tick, label in zip(ticks, labels, strict=True):
        x = axis.x(tick)
        parts.append(_line(x, top, x, bottom, GRID, 0.8))
        parts.append(_line(x, bottom, x, bottom + 3.5, "black", 0.8))
        parts.append(
            f'<text class="tick" data-value="{tick!r}" x="{number(x)}" y="{number(bottom + 17)}" '
            f'font-size="{FONT_SIZE}" text-anchor="middle">{escape(label)}</text>'
        )
    parts.append("</g>")
    return parts


def _row_label(right: float, centre: float, label: str, size: float) -> str:
    """A row's label, right-aligned, its lines centred on the row (the element's y)."""
    lines = label.split("\n")
    first = size * 0.35 - (len(lines) - 1) * size * 1.2 / 2
    spans = "".join(
        f'<tspan x="{number(right)}" dy="{number(first if i == 0 else size * 1.2)}">'
        f"{escape(line)}</tspan>"
        for i, line in enumerate(lines)
    )
    return (
        f'<text class="row" x="{number(right)}" y="{number(centre)}" font-size="{number(size)}" '
        f'text-anchor="end">{spans}</text>'
    )


def _legend_width(label: str) -> float:
    return 16 + text_width(label, FONT_SIZE)


def _legend(right: float, baseline: float, label: str) -> list[str]:
    """A legend entry of the mean's diamond, ending at `right`."""
    x = right - _legend_width(label)
    return [
        f'<g class="legend"><polygon points="{diamond(x + 4, baseline - 4, 4)}" fill="black"/>',
        text(x + 14, baseline, label),
        "</g>",
    ]
