"""Server-side SVG charts of a queue over a chosen window, from its QueueStat minutes.

The window (1 h, 6 h, 24 h, 7 d) sets the bucket size; each bucket sums the minutes in it
(finished, failed) or keeps their last reading (the depth by state). The queue page draws
one chart per measure, each with a y-axis and its unit, gridlines, a time axis, a `<title>`
tooltip per bucket and a legend in HTML that says exactly what is drawn; the overview draws
a small sparkline per queue. A series with a single value in a stretch is drawn as a point.
Colours come from the admin's CSS variables (admin.css), so dark mode applies; the
presentation attributes are the fallback. No JavaScript, nothing fetched.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.utils import formats, timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from ..reports.formats import grouped
from ..reports.queue_stats import StatPoint


@dataclasses.dataclass(frozen=True)
class Window:
    """A chart window: its span, the size of its buckets and the step of its time axis."""

    key: str  # the value of ?window= in the URL
    words: str  # marked for translation; `label` translates it
    span: timedelta
    bucket: timedelta
    tick: timedelta
    title: str  # the queue page's heading, marked for translation; `heading` translates it

    @property
    def label(self) -> str:
        return _(self.words)

    @property
    def heading(self) -> str:
        """The queue page's heading over the charts: "Last 24 hours"."""
        return _(self.title)

    @property
    def count(self) -> int:
        return self.span // self.bucket

    @property
    def bucket_words(self) -> str:
        """The bucket as a unit: "1 min", "10 min", "1 h"."""
        minutes = int(self.bucket.total_seconds() // 60)
        if minutes % 60 == 0:
            return _("%(n)s h") % {"n": minutes // 60}
        return _("%(n)s min") % {"n": minutes}


WINDOWS: dict[str, Window] = {
    w.key: w
    for w in (
        Window("1h", gettext_noop("1 h"), timedelta(hours=1), timedelta(minutes=1),
               timedelta(minutes=10), gettext_noop("Last hour")),
        Window("6h", gettext_noop("6 h"), timedelta(hours=6), timedelta(minutes=5),
               timedelta(hours=1), gettext_noop("Last 6 hours")),
        Window("24h", gettext_noop("24 h"), timedelta(hours=24), timedelta(minutes=10),
               timedelta(hours=3), gettext_noop("Last 24 hours")),
        Window("7d", gettext_noop("7 d"), timedelta(days=7), timedelta(hours=1),
               timedelta(days=1), gettext_noop("Last 7 days")),
    )
}  # fmt: skip
DEFAULT_WINDOW = WINDOWS["24h"]


def window_from(value: str | None) -> Window:
    """The window named by ?window=, the 24 h one for anything else."""
    return WINDOWS.get(value or "", DEFAULT_WINDOW)


@dataclasses.dataclass
class Bucket:
    start: datetime
    end: datetime
    #: The last reading of each state in the bucket; None: no reading.
    pending: int | None = None
    scheduled: int | None = None
    claimed: int | None = None
    finished: int = 0
    failed: int = 0
    #: Histograms of wait and run times (timings.py's bins), summed over the bucket.
    wait: list[int] = dataclasses.field(default_factory=list)
    run: list[int] = dataclasses.field(default_factory=list)
    #: The seconds the run histogram's calls took in all (timings.percentile's `seconds`).
    run_seconds: float = 0.0

    @property
    def depth(self) -> int | None:
        """Live jobs (pending + scheduled + claimed) at the last reading."""
        if self.pending is None:
            return None
        return self.pending + (self.scheduled or 0) + (self.claimed or 0)


def bucket_end(now: datetime, window: Window) -> datetime:
    """The end of the window's last bucket: the bucket boundary after `now`."""
    size = window.bucket.total_seconds()
    seconds = now.timestamp()
    return now + timedelta(seconds=size - seconds % size)


def bucketize(
    points: Sequence[StatPoint], now: datetime, window: Window = DEFAULT_WINDOW
) -> list[Bucket]:
    """Spread minutes (oldest first) over the window's buckets, the last one holding `now`."""
    end = bucket_end(now, window)
    start = end - window.span
    width = window.bucket
    buckets = [Bucket(start + width * i, start + width * (i + 1)) for i in range(window.count)]
    for point in points:
        index = (point.minute - start) // width
        if 0 <= index < window.count:
            bucket = buckets[index]
            bucket.pending, bucket.scheduled, bucket.claimed = (
                point.pending,
                point.scheduled,
                point.claimed,
            )  # the last reading wins
            bucket.finished += point.finished
            bucket.failed += point.failed
            bucket.wait = _add(bucket.wait, point.wait)
            bucket.run = _add(bucket.run, point.run)
            bucket.run_seconds += point.run_seconds
    return buckets


def _add(total: list[int], more: Sequence[int]) -> list[int]:
    if not more:
        return total
    if not total:
        return list(more)
    return [a + b for a, b in zip(total, more, strict=True)]


def fmt(n: float) -> str:
    """A whole number with the active language's thousands separator: 12,345 or 12.345."""
    return grouped(int(n))


def nice_ticks(peak: float, integers: bool = True, most: int = 5) -> list[float]:
    """Axis ticks from 0 to at least `peak`, on steps of 1, 2 or 5 times a power of ten;
    whole steps for counts, and 10 ms at least for durations."""
    peak = max(peak, 1.0 if integers else 0.01)
    raw = peak / (most - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integers:
        step = max(step, 1)
    count = math.ceil(peak / step - 1e-9)
    return [round(step * i, 9) for i in range(count + 1)]


def bucket_label(bucket: Bucket, window: Window) -> str:
    """ "14:10 to 14:20" in the site's time zone; the day too on the 7 d window."""
    start, end = timezone.localtime(bucket.start), timezone.localtime(bucket.end)
    day = formats.date_format(start, "D j ") if window.span > timedelta(days=1) else ""
    return _("%(day)s%(start)s to %(end)s") % {
        "day": day,
        "start": f"{start:%H:%M}",
        "end": f"{end:%H:%M}",
    }


# -- the plot: axes, gridlines, tooltips ---------------------------------------------------------

WIDTH, HEIGHT = 720, 190
LEFT, RIGHT, TOP, BOTTOM = 56, 10, 10, 24
TEXT = 'class="alk-chart-text" fill="#666" font-family="sans-serif" font-size="11"'


class Plot:
    """The frame of one large chart: scales, axes and the per-bucket tooltips."""

    def __init__(self, buckets: list[Bucket], window: Window, ticks: list[float]) -> None:
        self.buckets, self.window, self.ticks = buckets, window, ticks
        self.x0, self.x1 = LEFT, WIDTH - RIGHT
        self.y0, self.y1 = TOP, HEIGHT - BOTTOM
        self.step = (self.x1 - self.x0) / max(len(buckets), 1)
        self.top = ticks[-1] or 1

    def x(self, index: float) -> float:
        return self.x0 + self.step * index

    def y(self, value: float) -> float:
        return self.y1 - (self.y1 - self.y0) * min(value / self.top, 1.0)

    def axes(self, tick_label: Callable[[float], str]) -> list[str]:
        parts = []
        for value in self.ticks:
            y = self.y(value)
            parts.append(
                f'<line class="alk-chart-grid" x1="{self.x0}" x2="{self.x1}" y1="{y:.1f}" '
                f'y2="{y:.1f}" stroke="#ddd" stroke-width="1"/>'
                f'<text {TEXT} x="{self.x0 - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{escape(tick_label(value))}</text>"
            )
        start = self.buckets[0].start if self.buckets else timezone.now()
        for moment in time_ticks(start, self.window):
            x = self.x0 + (self.x1 - self.x0) * ((moment - start) / self.window.span)
            local = timezone.localtime(moment)
            label = (
                formats.date_format(local, "D j")
                if self.window.tick >= timedelta(days=1)
                else f"{local:%H:%M}"
            )
            parts.append(
                f'<line class="alk-chart-grid" x1="{x:.1f}" x2="{x:.1f}" y1="{self.y0}" '
                f'y2="{self.y1 + 4}" stroke="#ddd" stroke-width="1"/>'
                f'<text {TEXT} x="{x:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
                f"{escape(label)}</text>"
            )
        parts.append(
            f'<text {TEXT} x="2" y="{HEIGHT - 6}" text-anchor="start">'
            f"{escape(zone_label(self.buckets[-1].end if self.buckets else start))}</text>"
        )
        parts.append(
            f'<line class="alk-chart-axis" x1="{self.x0}" x2="{self.x1}" y1="{self.y1}" '
            f'y2="{self.y1}" stroke="#999" stroke-width="1"/>'
            f'<line class="alk-chart-axis" x1="{self.x0}" x2="{self.x0}" y1="{self.y0}" '
            f'y2="{self.y1}" stroke="#999" stroke-width="1"/>'
        )
        return parts

    def tooltips(self, describe: Callable[[Bucket], str]) -> list[str]:
        """One transparent column per bucket whose `<title>` the browser shows on hover."""
        return [
            f'<rect class="alk-chart-hover" x="{self.x(i):.1f}" y="{self.y0}" '
            f'width="{self.step:.2f}" height="{self.y1 - self.y0}" fill="transparent">'
            f"<title>{escape(bucket_label(bucket, self.window))}: {escape(describe(bucket))}"
            "</title></rect>"
            for i, bucket in enumerate(self.buckets)
        ]


def zone_label(at: datetime) -> str:
    """The time axis's zone at `at`, as short as its ticks: its abbreviation (CET, UTC,
    NZDT), or its offset from UTC where the zone has no abbreviation (UTC-03 for "-03")."""
    short = timezone.localtime(at).tzname() or ""
    return short if short[:1].isalpha() else f"UTC{short}"


def time_ticks(start: datetime, window: Window) -> list[datetime]:
    """The moments of the time axis's ticks: whole steps of the window's tick in the site's
    time zone (every 10 minutes, every hour, every 3 hours, every midnight)."""
    local = timezone.localtime(start)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    step = window.tick
    moment = midnight + step * math.ceil((local - midnight) / step)
    ticks = []
    while moment <= local + window.span:
        ticks.append(moment)
        moment += step
    return ticks


def line(plot: Plot, values: Sequence[float | None], name: str, colour: str) -> list[str]:
    """A series as a line through the bucket centres, broken where a bucket has no value; a
    value alone in its stretch is drawn as a point."""
    shapes: list[str] = []
    stretch: list[tuple[float, float]] = []
    for i, value in enumerate([*values, None]):
        if value is not None:
            stretch.append((plot.x(i + 0.5), plot.y(value)))
            continue
        shapes.extend(_stretch(stretch, name, colour))
        stretch = []
    return shapes


def _stretch(points: list[tuple[float, float]], name: str, colour: str) -> list[str]:
    if not points:
        return []
    if len(points) == 1:
        (x, y) = points[0]
        return [
            f'<circle class="alk-dot alk-{name}" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>'
        ]
    d = " ".join(f"{'L' if i else 'M'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(points))
    return [
        f'<path class="alk-line alk-{name}" d="{d}" fill="none" stroke="{colour}" '
        'stroke-width="1.8" stroke-linejoin="round"/>'
    ]


def svg(parts: list[str], summary: str, details: str, css: str = "alk-chart-large") -> str:
    """An accessible SVG: role img, the summary as its name, the details as its description."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="alk-chart {css}" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(summary)}"><title>{escape(summary)}</title>'
        f"<desc>{escape(details)}</desc>" + "".join(parts) + "</svg>"
    )


def figure(chart: str, legend: list[tuple[str, str]], note: str, chart_id: str) -> SafeString:
    """The chart and its legend: one swatch and sentence per series, then a note."""
    items = "".join(
        format_html('<li><span class="alk-swatch alk-{}"></span>{}</li>', name, text)
        for name, text in legend
    )
    return mark_safe(
        f'<figure class="alk-chart-figure" id="{chart_id}">{chart}'
        f'<figcaption><ul class="alk-legend">{items}</ul>'
        f'<p class="alk-chart-note">{escape(note)}</p></figcaption></figure>'
    )


FINISHED_COLOUR = "#5b9a2a"
FAILED_COLOUR = "#ba2121"
PENDING_COLOUR = "#417690"


# -- the overview's sparkline ----------------------------------------------------------------

#: The sparkline: a plot of PLOT_WIDTH, then a gutter naming each band's peak with its unit.
SPARK_WIDTH, SPARK_HEIGHT, PLOT_WIDTH = 250, 60, 178
#: The bands' tops (their peak) and bottoms (zero): the depth above, the bars below; the
#: baseline of the window's labels.
DEPTH_BAND, BARS_BAND, WINDOW_LINE = (4.0, 24.0), (30.0, 46.0), 57.0
SPARK_TEXT = 'class="alk-chart-text" fill="#666" font-family="sans-serif" font-size="10"'


def summary(name: str, buckets: list[Bucket], window: Window = DEFAULT_WINDOW) -> str:
    depths = [b.depth for b in buckets if b.depth is not None]
    depth = (
        _("depth now %(now)s, at most %(most)s") % {"now": fmt(depths[-1]),
                                                    "most": fmt(max(depths))}
        if depths else _("no depth reading")
    )  # fmt: skip
    return _("%(queue)s, last %(window)s: %(depth)s; finished %(finished)s, failed %(failed)s") % {
        "queue": name,
        "window": window.label,
        "depth": depth,
        "finished": fmt(sum(b.finished for b in buckets)),
        "failed": fmt(sum(b.failed for b in buckets)),
    }


def sparkline(name: str, buckets: list[Bucket], window: Window = DEFAULT_WINDOW) -> SafeString:
    """The overview's small chart, read without hovering: the depth as a line on top and the
    finished and failed jobs per bucket as bars below, each band's peak written beside its
    top with its unit, and the window's ends under it; its title says the figures in words."""
    depths = [b.depth for b in buckets]
    peak_depth = max((d for d in depths if d is not None), default=0)
    peak_rate = max((b.finished + b.failed for b in buckets), default=0)
    shapes = _spark_depth(depths, peak_depth, PLOT_WIDTH / max(len(buckets), 1))
    shapes += _spark_bars(buckets, peak_rate)
    for (top, _bottom), words in (
        (DEPTH_BAND, _("%(n)s jobs") % {"n": fmt(peak_depth)}),
        (BARS_BAND, _("%(n)s per %(per)s") % {"n": fmt(peak_rate), "per": window.bucket_words}),
    ):
        shapes.append(
            f'<line class="alk-chart-grid" x1="0" x2="{PLOT_WIDTH}" y1="{top}" y2="{top}" '
            f'stroke="#ddd" stroke-width="1" stroke-dasharray="2,2"/>'
            f'<text {SPARK_TEXT} x="{PLOT_WIDTH + 4}" y="{top + 7}">{escape(words)}</text>'
        )
    start, end = _("%(window)s ago") % {"window": window.label}, _("now")
    shapes.append(
        f'<text {SPARK_TEXT} x="0" y="{WINDOW_LINE}">{escape(start)}</text>'
        f'<text {SPARK_TEXT} x="{PLOT_WIDTH}" y="{WINDOW_LINE}" text-anchor="end">'
        f"{escape(end)}</text>"
    )
    text = escape(summary(name, buckets, window))
    return mark_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="alk-chart alk-sparkline" '
        f'width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" viewBox="0 0 {SPARK_WIDTH} '
        f'{SPARK_HEIGHT}" role="img" aria-label="{text}"><title>{text}</title>'
        f'<rect class="alk-chart-bg" x="0" y="0" width="{PLOT_WIDTH}" '
        f'height="{BARS_BAND[1] + 1}" fill="#f8f8f8"/>' + "".join(shapes) + "</svg>"
    )


def _spark_depth(depths: list[int | None], peak: int, step: float) -> list[str]:
    """The depth line, its peak at the top of DEPTH_BAND."""
    top, bottom = DEPTH_BAND
    shapes: list[str] = []
    stretch: list[tuple[float, float]] = []
    for i, depth in enumerate([*depths, None]):
        if depth is None:
            shapes += _stretch(stretch, "depth", PENDING_COLOUR)
            stretch = []
        else:
            stretch.append((step * (i + 0.5), bottom - (bottom - top) * depth / (peak or 1)))
    return shapes


def _spark_bars(buckets: list[Bucket], peak: int) -> list[str]:
    """Finished and failed bars stacked per bucket, the peak at the top of BARS_BAND."""
    top, bottom = BARS_BAND
    step = PLOT_WIDTH / max(len(buckets), 1)
    bar = max(step - 0.4, 0.6)
    shapes: list[str] = []
    for i, b in enumerate(buckets):
        done_h = (bottom - top) * b.finished / (peak or 1)
        failed_h = (bottom - top) * b.failed / (peak or 1)
        if done_h:
            shapes.append(f'<rect class="alk-bar alk-finished" x="{step * i:.1f}" '
                          f'y="{bottom - done_h:.1f}" width="{bar:.1f}" height="{done_h:.1f}" '
                          f'fill="{FINISHED_COLOUR}"/>')  # fmt: skip
        if failed_h:
            shapes.append(f'<rect class="alk-bar alk-failed" x="{step * i:.1f}" '
                          f'y="{bottom - done_h - failed_h:.1f}" width="{bar:.1f}" '
                          f'height="{failed_h:.1f}" fill="{FAILED_COLOUR}"/>')  # fmt: skip
    return shapes
