"""Server-side SVG charts of a queue over the last 24 hours, from its QueueStat minutes.

Two bands share the time axis: the depth (live jobs: pending + scheduled + claimed, the last
reading in each bucket) as a line on top, and the throughput (finished in green, failed
stacked in red) as bars below. No JavaScript, nothing fetched: the page works offline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ..status import StatPoint

DEPTH_COLOUR = "#417690"
FINISHED_COLOUR = "#5b9a2a"
FAILED_COLOUR = "#ba2121"
SPAN = timedelta(hours=24)
BUCKETS = 144  # 10 minutes each


@dataclasses.dataclass
class Bucket:
    start: datetime
    depth: int | None = None  # None: no reading in this bucket
    finished: int = 0
    failed: int = 0


def bucketize(
    points: Sequence[StatPoint], end: datetime, span: timedelta = SPAN, count: int = BUCKETS
) -> list[Bucket]:
    """Spread minutes (oldest first) over `count` equal buckets ending at `end`."""
    width = span / count
    start = end - span
    buckets = [Bucket(start + width * i) for i in range(count)]
    for point in points:
        index = (point.minute - start) // width
        if 0 <= index < count:
            bucket = buckets[index]
            bucket.depth = point.depth  # the last reading wins
            bucket.finished += point.finished
            bucket.failed += point.failed
    return buckets


def _fmt(n: float) -> str:
    return f"{int(n):,}"


def _depth_path(buckets: list[Bucket], x0: float, step: float, top: float, band: float) -> str:
    peak = max((b.depth for b in buckets if b.depth is not None), default=0) or 1
    commands, pen_down = [], False
    for i, bucket in enumerate(buckets):
        if bucket.depth is None:
            pen_down = False
            continue
        x = x0 + step * (i + 0.5)
        y = top + band - band * bucket.depth / peak
        commands.append(f"{'L' if pen_down else 'M'}{x:.1f},{y:.1f}")
        pen_down = True
    if not commands:
        return ""
    return (
        f'<path d="{" ".join(commands)}" fill="none" stroke="{DEPTH_COLOUR}" '
        'stroke-width="1.5" stroke-linejoin="round"/>'
    )


def _bars(buckets: list[Bucket], x0: float, step: float, top: float, band: float) -> list[str]:
    peak = max((b.finished + b.failed for b in buckets), default=0) or 1
    bar = max(step - 0.4, 0.6)
    shapes = []
    for i, bucket in enumerate(buckets):
        x = x0 + step * i
        done_h = band * bucket.finished / peak
        failed_h = band * bucket.failed / peak
        if done_h:
            y = top + band - done_h
            shapes.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" '
                f'height="{done_h:.1f}" fill="{FINISHED_COLOUR}"/>'
            )
        if failed_h:
            y = top + band - done_h - failed_h
            shapes.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" '
                f'height="{failed_h:.1f}" fill="{FAILED_COLOUR}"/>'
            )
    return shapes


def summary(name: str, buckets: list[Bucket]) -> str:
    depths = [b.depth for b in buckets if b.depth is not None]
    depth = f"depth now {_fmt(depths[-1])}, max {_fmt(max(depths))}" if depths else "no depth data"
    finished = sum(b.finished for b in buckets)
    failed = sum(b.failed for b in buckets)
    return f"{name}, last 24 h: {depth}; finished {_fmt(finished)}, failed {_fmt(failed)}"


def render(
    name: str, buckets: list[Bucket], width: int = 180, height: int = 44, labels: bool = False
) -> SafeString:
    """The chart as inline SVG. `labels` adds the scales and the time axis (detail page)."""
    left, top, bottom = (4, 14, 16) if labels else (0, 1, 1)
    plot_w, plot_h = width - 2 * left, height - top - bottom
    depth_band, gap = plot_h * 0.55, plot_h * 0.08
    bars_top = top + depth_band + gap
    bars_band = plot_h - depth_band - gap
    step = plot_w / max(len(buckets), 1)
    text = escape(summary(name, buckets))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="alk-chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{text}">',
        f"<title>{text}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f8"/>',
        f'<line x1="{left}" x2="{width - left}" y1="{bars_top + bars_band:.1f}" '
        f'y2="{bars_top + bars_band:.1f}" stroke="#ccc" stroke-width="0.5"/>',
        _depth_path(buckets, left, step, top, depth_band),
        *_bars(buckets, left, step, bars_top, bars_band),
    ]
    if labels:
        parts.extend(_labels(buckets, width, height, left))
    parts.append("</svg>")
    return mark_safe("".join(parts))


def _labels(buckets: list[Bucket], width: int, height: int, left: int) -> list[str]:
    """A legend with the scales on top, the time axis below."""
    peak_depth = max((b.depth for b in buckets if b.depth is not None), default=0)
    peak_rate = max((b.finished + b.failed for b in buckets), default=0)
    style = 'font-family="sans-serif" font-size="10" fill="#666"'
    return [
        f'<line x1="{left}" x2="{left + 14}" y1="7" y2="7" stroke="{DEPTH_COLOUR}" '
        'stroke-width="1.5"/>',
        f'<text x="{left + 18}" y="10" {style}>depth (max {_fmt(peak_depth)})</text>',
        f'<rect x="{left + 120}" y="2" width="9" height="9" fill="{FINISHED_COLOUR}"/>',
        f'<text x="{left + 133}" y="10" {style}>finished</text>',
        f'<rect x="{left + 180}" y="2" width="9" height="9" fill="{FAILED_COLOUR}"/>',
        f'<text x="{left + 193}" y="10" {style}>failed, per 10 min (max {_fmt(peak_rate)})</text>',
        f'<text x="{left}" y="{height - 4}" {style}>24 h ago</text>',
        f'<text x="{width / 2:.0f}" y="{height - 4}" text-anchor="middle" {style}>12 h ago</text>',
        f'<text x="{width - left}" y="{height - 4}" text-anchor="end" {style}>now</text>',
    ]
