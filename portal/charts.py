"""Tiny server-rendered SVG charts (no JavaScript, no CDN): geometry computed here, drawn by templates."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    value_label: str


@dataclass(frozen=True)
class BarChart:
    width: int
    height: int
    bars: list[Bar]
    max_label: str


def bar_chart(points: list[tuple[str, float]], *, width: int = 720, height: int = 160,
              fmt: str = "{:.2f}") -> BarChart:
    """Bars for ``points`` = [(label, value ≥ 0)], scaled to the largest value; empty input gives no bars."""
    top = max((v for _, v in points), default=0) or 1
    n = max(len(points), 1)
    slot = width / n
    bars = []
    for i, (label, value) in enumerate(points):
        h = (height - 20) * value / top
        bars.append(Bar(x=i * slot + slot * 0.1, y=height - 14 - h, width=slot * 0.8, height=h, label=label,
                        value_label=fmt.format(value)))
    return BarChart(width=width, height=height, bars=bars, max_label=fmt.format(top))


@dataclass(frozen=True)
class Segment:
    """One series' part of one stacked column."""

    x: float
    y: float
    width: float
    height: float
    series: str  # the series key (used as a CSS class suffix)
    title: str  # e.g. "2026-11-29 · App call: 2.00 CNY (Total 3.50 CNY)"


@dataclass(frozen=True)
class StackedBarChart:
    width: int
    height: int
    segments: list[Segment]  # only non-zero parts, bottom part of each column first
    legend: list[tuple[str, str]]  # (series key, label), in stacking order
    max_label: str


def stacked_bar_chart(columns: Sequence[tuple[str, Sequence[int]]], *, series: Sequence[tuple[str, str]],
                      fmt: Callable[[int], str], unit: str = "", total_label: str = "", width: int = 720,
                      height: int = 160) -> StackedBarChart:
    """Stacked columns for ``columns`` = [(label, [value ≥ 0 per series, in ``series`` order])], scaled to the
    largest column total; ``series`` = [(key, label)]. Values are integers (e.g. micro-CNY) formatted by
    ``fmt`` in the titles, so an amount is never rounded through a float; only the geometry is. With
    ``total_label``, each title also names its column's total. Raises
    ``ValueError`` when a column has not one value per series or a negative value.
    """
    for label, values in columns:
        if len(values) != len(series) or any(v < 0 for v in values):
            raise ValueError(f"column {label!r}: expected {len(series)} values ≥ 0, got {list(values)}")
    top = max((sum(values) for _, values in columns), default=0)
    drawn = height - 20  # pixels for the largest total; the base line is at height - 14
    slot = width / max(len(columns), 1)
    suffix = f" {unit}" if unit else ""
    segments = []
    for i, (label, values) in enumerate(columns):
        below = 0  # integer sum of the parts under this one: no float error accumulates up a column
        total = f" ({total_label} {fmt(sum(values))}{suffix})" if total_label else ""
        for (key, name), value in zip(series, values, strict=True):
            if value:
                below += value
                segments.append(Segment(x=i * slot + slot * 0.1, y=height - 14 - drawn * below / top,
                                        width=slot * 0.8, height=drawn * value / top, series=key,
                                        title=f"{label} · {name}: {fmt(value)}{suffix}{total}"))
    return StackedBarChart(width=width, height=height, segments=segments, legend=list(series),
                           max_label=f"{fmt(top)}{suffix}")


@dataclass(frozen=True)
class LineChart:
    width: int
    height: int
    paths: list[tuple[str, str]]  # (css class, SVG path "M x,y L …")
    y_min: float
    y_max: float
    x_max: float


def line_chart(series: dict[str, list[tuple[float, float]]], *, width: int = 720, height: int = 220) -> LineChart:
    """Polylines for named series of (x, y) points sharing one scale (e.g. cost of renting vs buying)."""
    xs = [x for pts in series.values() for x, _ in pts] or [0, 1]
    ys = [y for pts in series.values() for _, y in pts] or [0, 1]
    x0, x1 = min(xs), max(xs) or 1
    y0, y1 = min(min(ys), 0), max(ys) or 1
    pad = 24

    def sx(x: float) -> float:
        return pad + (width - 2 * pad) * (x - x0) / ((x1 - x0) or 1)

    def sy(y: float) -> float:
        return height - pad - (height - 2 * pad) * (y - y0) / ((y1 - y0) or 1)

    paths = [(name, " ".join(f"{'M' if i == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for i, (x, y) in enumerate(pts)))
             for name, pts in series.items()]
    return LineChart(width=width, height=height, paths=paths, y_min=y0, y_max=y1, x_max=x1)
