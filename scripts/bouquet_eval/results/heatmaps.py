"""A heatmap of a model's direction means, written as SVG directly.

A heatmap is a grid of squares, its row and column labels, a title and a colour scale: as SVG
elements, a few hundred lines of text. Drawn through matplotlib it cost each model's job about
1.5 CPU-s a figure (importing and laying out a figure, measuring every label's text, writing
every element through its renderer), more than the statistics it shows. The squares are vector
shapes as before (no image that blurs when zoomed into), each with its direction and value as a
tooltip; the colours are matplotlib's viridis (`VIRIDIS`: 33 of its colours, interpolated, 3/255
at most from its own).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

VIRIDIS = (
    "#440154", "#470d60", "#48186a", "#482374", "#472d7b", "#453781", "#424086", "#3e4989",
    "#3b528b", "#375b8d", "#33638d", "#2f6b8e", "#2c728e", "#297a8e", "#26828e", "#23898e",
    "#21918c", "#1f988b", "#1fa088", "#22a785", "#28ae80", "#32b67a", "#3fbc73", "#4ec36b",
    "#5ec962", "#70cf57", "#84d44b", "#98d83e", "#addc30", "#c2df23", "#d8e219", "#ece51b",
    "#fde725",
)  # fmt: skip
"""matplotlib's viridis at 33 evenly spaced points, from dark to bright."""
_STOPS = np.array([[int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)] for c in VIRIDIS])

FONT = "DejaVu Sans, Arial, sans-serif"
EMPTY = "#eeeeee"
"""The background, where a direction was not evaluated."""


def colours(values: np.ndarray, low: float, high: float, reverse: bool) -> np.ndarray:
    """(n, 3) RGB in [0, 1] of `values` on viridis from `low` to `high` (bright is high, or low
    when `reverse`), clipped at both ends."""
    span = high - low
    share = np.clip((values - low) / span, 0.0, 1.0) if span > 0 else np.full(values.shape, 0.5)
    if reverse:
        share = 1.0 - share
    points = np.linspace(0.0, 1.0, len(VIRIDIS))
    return np.stack([np.interp(share, points, _STOPS[:, k]) for k in range(3)], axis=1)


def hex_colour(rgb: Sequence[float]) -> str:
    return "#" + "".join(f"{round(255 * channel):02x}" for channel in rgb)


def text_colour(background: Sequence[float]) -> str:
    """Black on a light cell (the bright end of viridis), white on a dark one."""
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
    title_width = max((len(line) for line in heatmap.title), default=0) * 13 * 0.6 + 20
    width, height = round(max(margin + grid + 110, title_width)), top + grid + margin
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{FONT}">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for number, line in enumerate(heatmap.title):
        parts.append(
            f'<text x="{width / 2}" y="{16 + 17 * number + 12}" font-size="13" '
            f'text-anchor="middle">{html.escape(line)}</text>'
        )
    parts.append(f'<rect x="{margin}" y="{top}" width="{grid}" height="{grid}" fill="{EMPTY}"/>')
    rows, columns = np.nonzero(np.isfinite(heatmap.matrix))
    values = heatmap.matrix[rows, columns]
    rgb = colours(values, *heatmap.value_range, heatmap.reverse)
    for row, column, value, colour in zip(rows, columns, values, rgb, strict=True):
        x, y = margin + column * cell, top + row * cell
        tip = f"{languages[row]} \N{RIGHTWARDS ARROW} {languages[column]}: {value_text(value)}"
        parts.append(
            f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{hex_colour(colour)}">'
            f"<title>{html.escape(tip)}</title></rect>"
        )
        if heatmap.annotated:
            parts.append(
                f'<text x="{x + cell / 2}" y="{y + cell / 2 + 3}" font-size="9" '
                f'text-anchor="middle" fill="{text_colour(colour)}">'
                f"{html.escape(value_text(value))}</text>"
            )
    for index, code in enumerate(languages):
        centre = index * cell + cell / 2
        parts.append(
            f'<text x="{margin - 4}" y="{top + centre + label_size / 3}" '
            f'font-size="{label_size}" text-anchor="end">{html.escape(code)}</text>'
        )
        below = (margin + centre + label_size / 3, top + grid + 4)
        parts.append(
            f'<text transform="translate({below[0]} {below[1]}) rotate(-90)" '
            f'font-size="{label_size}" '
            f'text-anchor="end">{html.escape(code)}</text>'
        )
    parts.append(
        f'<text x="{margin + grid / 2}" y="{height - 6}" font-size="12" '
        'text-anchor="middle">target language</text>'
    )
    parts.append(
        f'<text transform="translate(14 {top + grid / 2}) rotate(-90)" font-size="12" '
        'text-anchor="middle">source language</text>'
    )
    parts += _colour_scale(heatmap, margin + grid + 24, top, min(grid, 300), value_text)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _colour_scale(
    heatmap: Heatmap, x: float, y: float, length: float, value_text: Callable[[float], str]
) -> list[str]:
    """A vertical bar from the highest value (top) to the lowest, its ends and middle labelled."""
    low, high = heatmap.value_range
    steps = np.linspace(high, low, len(VIRIDIS))
    stops = [
        f'<stop offset="{i / (len(steps) - 1):.4f}" stop-color="{hex_colour(colour)}"/>'
        for i, colour in enumerate(colours(steps, low, high, heatmap.reverse))
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
            f"{html.escape(value_text(value))}</text>"
        )
    parts.append(
        f'<text transform="translate({x + 7} {y + length + 14})" font-size="11" '
        f'text-anchor="middle">{html.escape(heatmap.label)}</text>'
    )
    return parts
