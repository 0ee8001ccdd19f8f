"""A heatmap of a model's direction means, written as SVG directly.

A heatmap is a grid of squares, its row and column labels, a title and a colour scale: as SVG
elements, a few hundred lines of text. Drawn through matplotlib it cost each model's job about
1.5 CPU-s a figure (importing and laying out a figure, measuring every label's text, writing
every element through its renderer), more than the statistics it shows. The squares are vector
shapes as before (no image that blurs when zoomed into), each with its direction and value as a
tooltip; the colours are matplotlib's viridis (`VIRIDIS`: 33 of its colours, interpolated, 3/255
at most from its own), or for a column with a target its RdBu (`RDBU`, its own 11 colours).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bouquet_eval.results.svgplot import escape, svg_close, svg_open, text_width

VIRIDIS = (
    "#440154", "#470d60", "#48186a", "#482374", "#472d7b", "#453781", "#424086", "#3e4989",
    "#3b528b", "#375b8d", "#33638d", "#2f6b8e", "#2c728e", "#297a8e", "#26828e", "#23898e",
    "#21918c", "#1f988b", "#1fa088", "#22a785", "#28ae80", "#32b67a", "#3fbc73", "#4ec36b",
    "#5ec962", "#70cf57", "#84d44b", "#98d83e", "#addc30", "#c2df23", "#d8e219", "#ece51b",
    "#fde725",
)  # fmt: skip
"""matplotlib's viridis at 33 evenly spaced points, from dark to bright."""
RDBU = (
    "#67001f", "#b2182b", "#d6604d", "#f4a582", "#fddbc7", "#f7f7f7", "#d1e5f0", "#92c5de",
    "#4393c3", "#2166ac", "#053061",
)  # fmt: skip
"""matplotlib's RdBu (ColorBrewer's 11 colours, which it interpolates): dark red, the light
middle, dark blue."""

EMPTY = "#eeeeee"
"""The background, where a direction was not evaluated."""
EMPTY_ON_DIVERGING = "#9e9e9e"
"""The background on a diverging scale: darker than its light middle, lest an empty cell look
like one on the target."""


def _rgb(palette: Sequence[str]) -> np.ndarray:
    return np.array([[int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)] for c in palette])


_VIRIDIS_STOPS, _RDBU_STOPS = _rgb(VIRIDIS), _rgb(RDBU)


@dataclass(frozen=True)
class ColourScale:
    """How a heatmap's values become colours: `stops` (RGB in [0, 1]) evenly from `low` to
    `high`, values beyond them clipped; `empty`, the colour of a cell of no direction."""

    stops: np.ndarray
    low: float
    high: float
    empty: str

    def colours(self, values: np.ndarray) -> np.ndarray:
        """(n, 3) RGB in [0, 1] of `values`."""
        span = self.high - self.low
        share = (
            np.clip((values - self.low) / span, 0.0, 1.0)
            if span > 0
            else np.full(values.shape, 0.5)
        )
        points = np.linspace(0.0, 1.0, len(self.stops))
        return np.stack([np.interp(share, points, self.stops[:, k]) for k in range(3)], axis=1)


def colour_scale(heatmap: Heatmap) -> ColourScale:
    """Viridis over `value_range`, bright at the better end whatever the metric's direction; a
    column with a target, RdBu with its light middle at the target and its ends as far from it
    on either side (the farther of `value_range`'s ends), so that equal distances look alike."""
    low, high = heatmap.value_range
    if heatmap.target is None:
        stops = _VIRIDIS_STOPS[::-1] if heatmap.reverse else _VIRIDIS_STOPS
        return ColourScale(stops, low, high, EMPTY)
    target = heatmap.target
    reach = max(abs(low - target), abs(high - target)) or 1.0  # all on the target: a scale still
    return ColourScale(_RDBU_STOPS, target - reach, target + reach, EMPTY_ON_DIVERGING)


def hex_colour(rgb: Sequence[float]) -> str:
    return "#" + "".join(f"{round(255 * channel):02x}" for channel in rgb)


def text_colour(background: Sequence[float]) -> str:
    """Black on a light cell (the bright end of viridis, the middle of RdBu), white on a dark
    one."""
    red, green, blue = background[:3]
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


@dataclass(frozen=True)
class Heatmap:
    """What a heatmap shows: `matrix[row, column]` (NaN where not evaluated), source languages
    as rows and target languages as columns (the same `languages` both ways)."""

    matrix: np.ndarray
    languages: Sequence[str]
    title: Sequence[str]
    """Its lines."""
    label: str
    """The colour scale's."""
    value_range: tuple[float, float]
    reverse: bool
    """Whether lower values are the bright end (lower is better)."""
    annotated: bool
    """Whether each square carries its value as text."""
    target: float | None = None
    """The value that is best (`MetricRecord.targets`), if any: a diverging scale light at it
    (`colour_scale`), whatever `reverse`."""


def heatmap_svg(heatmap: Heatmap, value_text: Callable[[float], str]) -> str:
    """The heatmap as an SVG document; `value_text` writes a value (annotations, tooltips)."""
    languages = list(heatmap.languages)
    count = len(languages)
    cell = 36 if heatmap.annotated else 12
    label_size = 11 if heatmap.annotated else max(6, 11 - count // 40)
    longest = max((len(code) for code in languages), default=0)
    margin = round(longest * label_size * 0.62) + 24  # room for the labels and axis names
    top = 16 + 17 * len(heatmap.title) + 8
    grid = count * cell
    title_width = max((text_width(line, 13) for line in heatmap.title), default=0) + 20
    width, height = round(max(margin + grid + 110, title_width)), top + grid + margin
    parts = svg_open(width, height)
    for number, line in enumerate(heatmap.title):
        parts.append(
            f'<text x="{width / 2}" y="{16 + 17 * number + 12}" font-size="13" '
            f'text-anchor="middle">{escape(line)}</text>'
        )
    scale = colour_scale(heatmap)
    parts.append(
        f'<rect x="{margin}" y="{top}" width="{grid}" height="{grid}" fill="{scale.empty}"/>'
    )
    rows, columns = np.nonzero(np.isfinite(heatmap.matrix))
    values = heatmap.matrix[rows, columns]
    rgb = scale.colours(values)
    for row, column, value, colour in zip(rows, columns, values, rgb, strict=True):
        x, y = margin + column * cell, top + row * cell
        tip = f"{languages[row]} \N{RIGHTWARDS ARROW} {languages[column]}: {value_text(value)}"
        parts.append(
            f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{hex_colour(colour)}">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if heatmap.annotated:
            parts.append(
                f'<text x="{x + cell / 2}" y="{y + cell / 2 + 3}" font-size="9" '
                f'text-anchor="middle" fill="{text_colour(colour)}">'
                f"{escape(value_text(value))}</text>"
            )
    for index, code in enumerate(languages):
        centre = index * cell + cell / 2
        parts.append(
            f'<text x="{margin - 4}" y="{top + centre + label_size / 3}" '
            f'font-size="{label_size}" text-anchor="end">{escape(code)}</text>'
        )
        below = (margin + centre + label_size / 3, top + grid + 4)
        parts.append(
            f'<text transform="translate({below[0]} {below[1]}) rotate(-90)" '
            f'font-size="{label_size}" '
            f'text-anchor="end">{escape(code)}</text>'
        )
    parts.append(
        f'<text x="{margin + grid / 2}" y="{height - 6}" font-size="12" '
        'text-anchor="middle">target language</text>'
    )
    parts.append(
        f'<text transform="translate(14 {top + grid / 2}) rotate(-90)" font-size="12" '
        'text-anchor="middle">source language</text>'
    )
    parts += _colour_bar(heatmap.label, scale, margin + grid + 24, top, min(grid, 300), value_text)
    return svg_close(parts)


def _colour_bar(
    label: str,
    scale: ColourScale,
    x: float,
    y: float,
    length: float,
    value_text: Callable[[float], str],
) -> list[str]:
    """A vertical bar from the highest value (top) to the lowest, its ends and middle labelled."""
    low, high = scale.low, scale.high
    steps = np.linspace(high, low, len(scale.stops))
    stops = [
        f'<stop offset="{i / (len(steps) - 1):.4f}" stop-color="{hex_colour(colour)}"/>'
        for i, colour in enumerate(scale.colours(steps))
    ]
    parts = [
        '<defs><linearGradient id="scale" x1="0" y1="0" x2="0" y2="1">',
        *stops,
        "</linearGradient></defs>",
        f'<rect x="{x}" y="{y}" width="14" height="{length}" fill="url(#scale)" '
        'stroke="#888888" stroke-width="0.5"/>',
    ]
    for share, value in ((0.0, high), (0.5, (low + high) / 2), (1.0, low)):
        parts.append(
            f'<text x="{x + 18}" y="{y + share * length + 4}" font-size="10">'
            f"{escape(value_text(value))}</text>"
        )
    parts.append(
        f'<text transform="translate({x + 7} {y + length + 14})" font-size="11" '
        f'text-anchor="middle">{escape(label)}</text>'
    )
    return parts
