"""The queue page's charts: throughput, depth by state, wait and run times (charts.py draws
their frame). Each states in its legend exactly what it draws."""

from __future__ import annotations

from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import timings
from .charts import (
    FAILED_COLOUR,
    FINISHED_COLOUR,
    PENDING_COLOUR,
    Bucket,
    Plot,
    Window,
    figure,
    fmt,
    line,
    nice_ticks,
    svg,
)

# -- the charts ----------------------------------------------------------------------------------

SCHEDULED_COLOUR = "#b08a00"
CLAIMED_COLOUR = "#7b4fa0"


def throughput_chart(name: str, buckets: list[Bucket], window: Window) -> SafeString:
    """Finished (succeeded) and failed attempts per bucket, stacked bars."""
    peak = max((b.finished + b.failed for b in buckets), default=0)
    plot = Plot(buckets, window, nice_ticks(peak))
    parts = plot.axes(fmt)
    bar = max(plot.step - 0.6, 0.8)
    for i, bucket in enumerate(buckets):
        base = float(plot.y1)
        for count, css, colour in ((bucket.finished, "finished", FINISHED_COLOUR),
                                   (bucket.failed, "failed", FAILED_COLOUR)):  # fmt: skip
            if count:
                top = base - (plot.y1 - plot.y0) * count / plot.top
                parts.append(
                    f'<rect class="alk-bar alk-{css}" x="{plot.x(i) + 0.3:.1f}" y="{top:.1f}" '
                    f'width="{bar:.2f}" height="{base - top:.1f}" fill="{colour}"/>'
                )
                base = top
    parts += plot.tooltips(
        lambda b: (
            _("finished %(finished)s, failed %(failed)s")
            % {"finished": fmt(b.finished), "failed": fmt(b.failed)}
        )
    )
    finished = sum(b.finished for b in buckets)
    failed = sum(b.failed for b in buckets)
    most_finished = max((b.finished for b in buckets), default=0)
    most_failed = max((b.failed for b in buckets), default=0)
    per = window.bucket_words
    summary = _(
        "%(queue)s, throughput over the last %(window)s: finished %(finished)s, failed %(failed)s"
    ) % {"queue": name, "window": window.label, "finished": fmt(finished), "failed": fmt(failed)}
    finished_words = _(
        "finished (succeeded): %(total)s in %(window)s, at most %(most)s per %(per)s"
    ) % {"total": fmt(finished), "window": window.label, "most": fmt(most_finished), "per": per}
    failed_words = _(
        "failed attempts (retried or dead-lettered): %(total)s in %(window)s, at most %(most)s "
        "per %(per)s"
    ) % {"total": fmt(failed), "window": window.label, "most": fmt(most_failed), "per": per}
    legend = [("finished", finished_words), ("failed", failed_words)]
    note = _("Jobs per %(per)s; failed bars are stacked on finished ones.") % {"per": per}
    chart = svg(parts, summary, note)
    return figure(chart, legend, note, "alk-chart-throughput")


DEPTH_SERIES = (
    ("pending", PENDING_COLOUR, gettext_lazy("pending (due, waiting for a worker)")),
    ("scheduled", SCHEDULED_COLOUR, gettext_lazy("scheduled (due later)")),
    ("claimed", CLAIMED_COLOUR, gettext_lazy("running (claimed)")),
)


def depth_chart(name: str, buckets: list[Bucket], window: Window) -> SafeString:
    """The live jobs by state, as read by the leader: the last reading of each bucket."""
    readings = {key: [getattr(b, key) for b in buckets] for key, _c, _l in DEPTH_SERIES}
    peak = max((v for values in readings.values() for v in values if v is not None), default=0)
    plot = Plot(buckets, window, nice_ticks(peak))
    parts = plot.axes(fmt)
    legend = []
    for key, colour, words in DEPTH_SERIES:
        values = readings[key]
        parts += line(plot, values, key, colour)
        seen = [v for v in values if v is not None]
        figures = (
            _("now %(now)s, at most %(most)s") % {"now": fmt(seen[-1]), "most": fmt(max(seen))}
            if seen
            else _("no reading")
        )
        legend.append((key, f"{words}: {figures}"))
    parts += plot.tooltips(_depth_words)
    depths = [b.depth for b in buckets if b.depth is not None]
    summary = _("%(queue)s, jobs by state over the last %(window)s: %(figures)s") % {
        "queue": name,
        "window": window.label,
        "figures": _("now %(now)s, at most %(most)s") % {"now": fmt(depths[-1]),
                                                          "most": fmt(max(depths))}
        if depths else _("no reading"),
    }  # fmt: skip
    note = _("Jobs; each point is the last reading in its %(per)s.") % {"per": window.bucket_words}
    return figure(svg(parts, summary, note), legend, note, "alk-chart-depth")


def _depth_words(bucket: Bucket) -> str:
    if bucket.pending is None:
        return _("no reading")
    return _("pending %(pending)s, scheduled %(scheduled)s, running %(claimed)s") % {
        "pending": fmt(bucket.pending),
        "scheduled": fmt(bucket.scheduled or 0),
        "claimed": fmt(bucket.claimed or 0),
    }


P50_COLOUR = "#417690"
P95_COLOUR = "#c05a00"


def timing_chart(name: str, buckets: list[Bucket], window: Window, kind: str) -> SafeString:
    """The median and 95th percentile of the wait ("wait") or run ("run") time per bucket,
    estimated from the minutes' histograms (timings.py); the run's is the handler duration
    histogram that /metrics/ exports too."""
    p50 = [_percentile(b, kind, 0.5) for b in buckets]
    p95 = [_percentile(b, kind, 0.95) for b in buckets]
    peak = max((v for v in p95 if v is not None), default=0.0)
    plot = Plot(buckets, window, nice_ticks(peak, integers=False))
    parts = plot.axes(timings.duration_words)
    parts += line(plot, p50, "p50", P50_COLOUR)
    parts += line(plot, p95, "p95", P95_COLOUR)
    what = _("wait") if kind == "wait" else _("run time")

    def describe(bucket: Bucket) -> str:
        hist = getattr(bucket, kind)
        n = sum(hist) if hist else 0
        if not n:
            return _("no job")
        return _("p50 %(p50)s, p95 %(p95)s (%(n)s jobs)") % {
            "p50": timings.duration_words(_percentile(bucket, kind, 0.5) or 0.0),
            "p95": timings.duration_words(_percentile(bucket, kind, 0.95) or 0.0),
            "n": fmt(n),
        }

    parts += plot.tooltips(describe)
    legend = [
        ("p50", _("median (p50) %(what)s: %(figures)s") % {"what": what, "figures": _peaks(p50)}),
        ("p95", _("95th percentile (p95) %(what)s: %(figures)s")
         % {"what": what, "figures": _peaks(p95)}),
    ]  # fmt: skip
    if kind == "wait":
        note = _(
            "Per %(per)s: time from when each job was due (enqueued, scheduled or "
            "retried) to its handler's start."
        ) % {"per": window.bucket_words}
        bins = _(
            "Estimated from bins up to 10 ms, 30 ms, 100 ms, 300 ms, 1 s, 3 s, 10 s, 30 s, 1 min, "
            "5 min, 15 min and 1 h."
        )
    else:
        note = _(
            "Per %(per)s: time each handler call took (a batch consumer's call counts once), "
            "as exported at /metrics/."
        ) % {"per": window.bucket_words}
        bins = _(
            "Estimated from bins up to 5 ms, 25 ms, 100 ms, 500 ms, 1 s, 5 s, 30 s and 5 min, "
            "placed within a bin by the calls' total time."
        )
    note = note + " " + bins
    summary = _("%(queue)s, %(what)s over the last %(window)s: %(figures)s") % {
        "queue": name, "what": what, "window": window.label, "figures": _peaks(p95),
    }  # fmt: skip
    return figure(svg(parts, summary, note), legend, note, f"alk-chart-{kind}")


def _percentile(bucket: Bucket, kind: str, fraction: float) -> float | None:
    """The bucket's estimate: the wait's from its bins, the run's placed by its total."""
    if kind == "wait":
        return timings.percentile(bucket.wait, fraction) if bucket.wait else None
    if not bucket.run:
        return None
    return timings.percentile(bucket.run, fraction, timings.RUN_BOUNDS, bucket.run_seconds)


def _peaks(values: list[float | None]) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return _("no job")
    return _("latest %(latest)s, highest %(most)s") % {
        "latest": timings.duration_words(seen[-1]),
        "most": timings.duration_words(max(seen)),
    }
