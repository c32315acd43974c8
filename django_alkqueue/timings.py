"""Wait and run times as histograms: what the workers add to QueueStat each minute and what
the queue page's charts read their percentiles from. No database.

A percentile cannot be added up across workers and minutes; a histogram can. Each worker
counts its jobs' times into fixed bins and adds the counts to the minute's QueueStat row with
the finished and failed counts, in one batched upsert; a chart bucket sums its minutes' bins
and estimates p50 and p95 from them, interpolating within the bin on a log scale. The
estimate is as good as the bins: within a factor of about 5 at worst, far closer in practice.

- wait: seconds from when the job was due (its enqueue, or its scheduled run_at, or its
  retry's) to its handler's start; bins BOUNDS, columns wait_10ms ... wait_over;
- run: seconds a handler call took (Executor.call, a batch consumer's call counted once):
  the duration_count / duration_le_* histogram that /metrics/ exports
  (alkqueue_handler_duration_seconds), bins RUN_BOUNDS (models.DURATION_BUCKETS). One run-time
  histogram feeds both the chart and the metrics; run_bins turns its cumulative columns into
  per-bin counts.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from django.utils import formats
from django.utils.translation import gettext as _

from .models import DURATION_BUCKETS

#: The upper bounds of the bins, in seconds; one more bin holds what is over an hour.
BOUNDS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
#: The bins' names in the QueueStat columns: wait_10ms ... wait_over.
NAMES = ("10ms", "30ms", "100ms", "300ms", "1s", "3s", "10s", "30s", "1m", "5m", "15m", "1h",
         "over")  # fmt: skip
BINS = len(NAMES)
WAIT_FIELDS = tuple(f"wait_{name}" for name in NAMES)
#: The run time's bins: the handler duration histogram's bounds; one more bin past 300 s.
RUN_BOUNDS = tuple(bound for bound, _column in DURATION_BUCKETS)
RUN_BINS = len(RUN_BOUNDS) + 1
#: The QueueStat columns run_bins reads: the count, then the cumulative counts per bound.
RUN_FIELDS = ("duration_count", *(column for _bound, column in DURATION_BUCKETS))
#: The lower edge of the first bin, for the interpolation (a millisecond).
FLOOR = 0.001


def bin_of(seconds: float) -> int:
    """The bin of a time: the first whose bound is not below it (negative counts as 0)."""
    return bisect.bisect_left(BOUNDS, seconds)


def empty() -> list[int]:
    return [0] * BINS


def run_bins(count: int, cumulative: Sequence[int]) -> tuple[int, ...]:
    """Per-bin counts (RUN_BINS of them) of the run-time histogram from its columns: the
    calls counted and how many took at most each RUN_BOUNDS bound."""
    bins = [b - a for a, b in zip((0, *cumulative), cumulative, strict=False)]
    return (*bins, count - (cumulative[-1] if cumulative else 0))


def percentile(
    counts: Sequence[int], fraction: float, bounds: Sequence[float] = BOUNDS
) -> float | None:
    """The estimated time below which `fraction` of the counted jobs fall, with `counts` per
    bin of `bounds` and one past the last (BOUNDS for the wait, RUN_BOUNDS for the run);
    None when none were counted. In the last bin it is that bin's lower edge."""
    total = sum(counts)
    if not total:
        return None
    rank = fraction * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            if index == len(bounds):
                return bounds[-1]
            low = bounds[index - 1] if index else FLOOR
            high = bounds[index]
            share = (rank - seen) / count
            return math.exp(math.log(low) + (math.log(high) - math.log(low)) * share)
        seen += count
    return bounds[-1]


def duration_words(seconds: float) -> str:
    """ "40 ms", "1.5 s", "2.5 min", "1.2 h": a time in its best unit, in the active
    language (its decimal separator: "1,5 s" in German)."""
    if seconds < 1:
        return _("%(n)s ms") % {"n": f"{seconds * 1000:.0f}"}
    if seconds < 60:
        return _("%(n)s s") % {"n": _decimal(seconds)}
    if seconds < 3600:
        return _("%(n)s min") % {"n": _decimal(seconds / 60)}
    return _("%(n)s h") % {"n": _decimal(seconds / 3600)}


def _decimal(value: float) -> str:
    """Three significant digits with the active language's decimal separator."""
    return f"{value:.3g}".replace(".", str(formats.get_format("DECIMAL_SEPARATOR")))
