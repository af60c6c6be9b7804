"""The latency distributions of a ``bench serve`` run as one SVG: an empirical CDF per
metric (TTFT, TPOT, ITL, end-to-end), the median and p99 marked. No plotting library."""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

from llmkit.bench.serve.metrics import percentile
from llmkit.bench.serve.options import METRICS

_PANEL_W, _PANEL_H = 420, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 40, 44
_COLS = 2


def latency_svg(samples: dict[str, list[float]], title: str) -> str:
    """An SVG document: one panel per metric with samples (seconds), drawn in milliseconds."""
    names = [n for n in METRICS if samples.get(n)]
    rows = max(1, math.ceil(len(names) / _COLS))
    width, height = _COLS * _PANEL_W, rows * _PANEL_H + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for i, name in enumerate(names):
        x0, y0 = (i % _COLS) * _PANEL_W, 30 + (i // _COLS) * _PANEL_H
        parts.append(_panel(x0, y0, METRICS[name], [v * 1e3 for v in samples[name]]))
    if not names:
        parts.append(f'<text x="{width / 2}" y="60" text-anchor="middle">no samples</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _panel(x0: float, y0: float, header: str, values_ms: Sequence[float]) -> str:
    ordered = sorted(values_ms)
    top = _nice_ceiling(ordered[-1])
    w, h = _PANEL_W - _LEFT - _RIGHT, _PANEL_H - _TOP - _BOTTOM
    left, base = x0 + _LEFT, y0 + _TOP + h

    def sx(v: float) -> float:
        return left + w * v / top

    def sy(q: float) -> float:
        return base - h * q

    out = [
        f'<text x="{x0 + _PANEL_W / 2}" y="{y0 + 22}" text-anchor="middle" font-size="12">'
        f"{escape(header)} ({len(ordered)} samples)</text>",
        f'<rect x="{left}" y="{y0 + _TOP}" width="{w}" height="{h}" fill="none" stroke="#999"/>',
        f'<text x="{left + w / 2}" y="{base + 34}" text-anchor="middle">milliseconds</text>',
    ]
    for k in range(5):
        v, q = top * k / 4, k / 4
        out.append(f'<text x="{sx(v):.1f}" y="{base + 16}" text-anchor="middle">{v:g}</text>')
        out.append(f'<text x="{left - 6}" y="{sy(q) + 4:.1f}" text-anchor="end">{q:.2f}</text>')
    points = [f"{sx(0):.1f},{sy(0):.1f}"]
    for k, v in enumerate(ordered):
        points.append(f"{sx(v):.1f},{sy(k / len(ordered)):.1f}")
        points.append(f"{sx(v):.1f},{sy((k + 1) / len(ordered)):.1f}")
    out.append(
        f'<polyline points="{" ".join(points)}" fill="none" stroke="#1f6feb" stroke-width="1.5"/>'
    )
    for p, colour in ((50, "#2da44e"), (99, "#cf222e")):
        v = percentile(ordered, p)
        out.append(
            f'<line x1="{sx(v):.1f}" y1="{y0 + _TOP}" x2="{sx(v):.1f}" y2="{base}" '
            f'stroke="{colour}" stroke-dasharray="4 3"/>'
        )
        out.append(
            f'<text x="{sx(v) + 3:.1f}" y="{y0 + _TOP + 12 + (p == 99) * 12}" '
            f'fill="{colour}">p{p} {v:.1f}</text>'
        )
    return "\n".join(out)


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)
