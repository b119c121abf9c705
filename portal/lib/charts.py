"""The one chart module: tiny server-rendered SVG charts (no JavaScript, no CDN).

- ``bar_chart`` and ``stacked_bar_chart``: bars (daily calls and revenue; cost per day by kind);
- ``line_chart``: several series on one scale (renting vs buying);
- ``svg_line_chart``: one series with its min / max labels, as a whole ``<svg>`` element (loss, tokens/s).

The first three compute geometry that templates draw; all share one linear scale (:func:`_scale`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from django.utils.safestring import SafeString, mark_safe


def _scale(lo: float, hi: float, start: float, length: float, *, flip: bool = False) -> Callable[[float], float]:
    """Map ``[lo, hi]`` linearly onto ``length`` pixels from ``start`` (downwards from ``start + length`` when
    ``flip``, as SVG's y axis grows down); an empty range maps as if it were 1 wide."""
    span = (hi - lo) or 1

    def to_px(v: float) -> float:
        offset = length * (v - lo) / span
        return start + length - offset if flip else start + offset

    return to_px


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
    max_label: str  # "" when every value is 0: an empty chart shows no made-up scale ("1", "1.00")
    empty: bool = False


def bar_chart(points: list[tuple[str, float]], *, width: int = 720, height: int = 160, fmt: str = "{:.2f}") -> BarChart:
    """Bars for ``points`` = [(label, value ≥ 0)], scaled to the largest value; empty input gives no bars, and
    all-zero input an ``empty`` chart with no scale label."""
    actual = max((v for _, v in points), default=0)
    top = actual or 1
    n = max(len(points), 1)
    slot = width / n
    bars = []
    for i, (label, value) in enumerate(points):
        h = (height - 20) * value / top
        bars.append(
            Bar(
                x=i * slot + slot * 0.1,
                y=height - 14 - h,
                width=slot * 0.8,
                height=h,
                label=label,
                value_label=fmt.format(value),
            )
        )
    return BarChart(
        width=width, height=height, bars=bars, max_label=fmt.format(top) if actual else "", empty=not actual
    )


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
    first_label: str = ""  # the first and last column's labels (e.g. dates), shown under the chart
    last_label: str = ""


def stacked_bar_chart(
    columns: Sequence[tuple[str, Sequence[int]]],
    *,
    series: Sequence[tuple[str, str]],
    fmt: Callable[[int], str],
    unit: str = "",
    total_label: str = "",
    width: int = 720,
    height: int = 160,
) -> StackedBarChart:
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
                segments.append(
                    Segment(
                        x=i * slot + slot * 0.1,
                        y=height - 14 - drawn * below / top,
                        width=slot * 0.8,
                        height=drawn * value / top,
                        series=key,
                        title=f"{label} · {name}: {fmt(value)}{suffix}{total}",
                    )
                )
    return StackedBarChart(
        width=width,
        height=height,
        segments=segments,
        legend=list(series),
        max_label=f"{fmt(top)}{suffix}",
        first_label=columns[0][0] if columns else "",
        last_label=columns[-1][0] if columns else "",
    )


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
    sx = _scale(x0, x1, pad, width - 2 * pad)
    sy = _scale(y0, y1, pad, height - 2 * pad, flip=True)

    paths = [
        (name, " ".join(f"{'M' if i == 0 else 'L'}{sx(x):.1f},{sy(y):.1f}" for i, (x, y) in enumerate(pts)))
        for name, pts in series.items()
    ]
    return LineChart(width=width, height=height, paths=paths, y_min=y0, y_max=y1, x_max=x1)


def svg_line_chart(
    points: Sequence[tuple[float, float]],
    *,
    title: str,
    color: str = "#3257d9",
    width: int = 640,
    height: int = 200,
    unit: str = "",
    y_min: float | None = None,
    x_label: Callable[[float], str] | None = None,
) -> SafeString:
    """A line chart of ``(x, y)`` points with min / max labels, as an ``<svg>`` element.

    ``title`` becomes the accessible name (``role="img"`` + ``<title>``). An empty series draws an empty frame
    with "no data". Values are plain floats (never money). ``y_min``: where the y axis starts (e.g. 0 for a
    percentage or a size, so that the axis never goes negative and a flat line is not magnified); a value
    below it is drawn at it. ``x_label``: the text under the first and the last x, from its value (default: the
    value itself, e.g. ``-2`` where ``x_label`` may say "2 min ago").
    """
    pad_l, pad_r, pad_t, pad_b = 56, 12, 22, 24
    inner_w, inner_h = width - pad_l - pad_r, height - pad_t - pad_b
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'class="chart" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<rect x="{pad_l}" y="{pad_t}" width="{inner_w}" height="{inner_h}" fill="#fff" stroke="#e3e6ee"/>',
        f'<text x="{pad_l}" y="14" font-size="12" fill="#6b7385">{escape(title)}</text>',
    ]
    if not points:
        parts.append(
            f'<text x="{pad_l + inner_w / 2}" y="{pad_t + inner_h / 2}" font-size="12" '
            f'text-anchor="middle" fill="#6b7385">—</text></svg>'
        )
        return mark_safe("".join(parts))  # noqa: S308 - every interpolated text is escaped
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    label = x_label or (lambda x: f"{x:g}")
    first, last = label(x0), label(x1) if x1 != x0 else ""
    y0, y1 = min(ys), max(ys)
    if y_min is not None:
        y0, y1 = y_min, max(y1, y_min)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    sx = _scale(x0, x1, pad_l, inner_w)
    sy = _scale(y0, y1, pad_t, inner_h, flip=True)

    path = " ".join(f"{sx(x):.1f},{sy(max(y, y0)):.1f}" for x, y in points)
    parts.append(f'<polyline fill="none" stroke="{escape(color)}" stroke-width="1.8" points="{path}"/>')
    parts.append(
        f'<text x="{pad_l - 4}" y="{pad_t + 10}" font-size="11" text-anchor="end" fill="#6b7385">'
        f"{y1:.4g}{escape(unit)}</text>"
    )
    parts.append(
        f'<text x="{pad_l - 4}" y="{pad_t + inner_h}" font-size="11" text-anchor="end" fill="#6b7385">'
        f"{y0:.4g}{escape(unit)}</text>"
    )
    parts.append(f'<text x="{pad_l}" y="{height - 6}" font-size="11" fill="#6b7385">{escape(first)}</text>')
    parts.append(
        f'<text x="{pad_l + inner_w}" y="{height - 6}" font-size="11" text-anchor="end" '
        f'fill="#6b7385">{escape(last)}</text></svg>'
    )
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text is escaped
