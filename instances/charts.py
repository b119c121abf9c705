"""Server-rendered inline SVG line charts for the console (no JavaScript, no CDN)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from django.utils.safestring import SafeString, mark_safe


def svg_line_chart(points: Sequence[tuple[float, float]], *, title: str, color: str = "#3257d9",
                   width: int = 640, height: int = 200, unit: str = "") -> SafeString:
    """A line chart of ``(x, y)`` points with min / max labels, as an ``<svg>`` element.

    ``title`` becomes the accessible name (``role="img"`` + ``<title>``). An empty series draws an empty frame
    with "no data". Values are plain floats (never money).
    """
    pad_l, pad_r, pad_t, pad_b = 56, 12, 22, 24
    inner_w, inner_h = width - pad_l - pad_r, height - pad_t - pad_b
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
             f'class="chart" aria-label="{escape(title)}"><title>{escape(title)}</title>',
             f'<rect x="{pad_l}" y="{pad_t}" width="{inner_w}" height="{inner_h}" fill="#fff" stroke="#e3e6ee"/>',
             f'<text x="{pad_l}" y="14" font-size="12" fill="#6b7385">{escape(title)}</text>']
    if not points:
        parts.append(f'<text x="{pad_l + inner_w / 2}" y="{pad_t + inner_h / 2}" font-size="12" '
                     f'text-anchor="middle" fill="#6b7385">—</text></svg>')
        return mark_safe("".join(parts))  # noqa: S308 - every interpolated text is escaped
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1

    def sx(x: float) -> float:
        return pad_l + (x - x0) / (x1 - x0) * inner_w

    def sy(y: float) -> float:
        return pad_t + inner_h - (y - y0) / (y1 - y0) * inner_h

    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    parts.append(f'<polyline fill="none" stroke="{escape(color)}" stroke-width="1.8" points="{path}"/>')
    parts.append(f'<text x="{pad_l - 4}" y="{pad_t + 10}" font-size="11" text-anchor="end" fill="#6b7385">'
                 f'{y1:.4g}{escape(unit)}</text>')
    parts.append(f'<text x="{pad_l - 4}" y="{pad_t + inner_h}" font-size="11" text-anchor="end" fill="#6b7385">'
                 f'{y0:.4g}{escape(unit)}</text>')
    parts.append(f'<text x="{pad_l}" y="{height - 6}" font-size="11" fill="#6b7385">{x0:g}</text>')
    parts.append(f'<text x="{pad_l + inner_w}" y="{height - 6}" font-size="11" text-anchor="end" '
                 f'fill="#6b7385">{x1:g}</text></svg>')
    return mark_safe("".join(parts))  # noqa: S308 - every interpolated text is escaped
