"""Wait and run times as histograms: what the workers add to QueueStat each minute and what
the queue page's charts read their percentiles from. No database.

A percentile cannot be added up across workers and minutes; a histogram can. Each worker
counts its jobs' times into fixed bins and adds the counts to the minute's QueueStat row with
the finished and failed counts, in one batched upsert; a chart bucket sums its minutes' bins
and estimates p50 and p95 from them, interpolating within the bin on a log scale. The
estimate is as good as the bins: within a bin's width (a factor of about 5) at worst.

The run time has its total too (duration_sum, as /metrics/ exports it), which tells where in
its bin the calls fell: the bin's mean is what the total leaves after the other bins' calls
are counted at their bins' log-mean, and the interpolation leans toward it (`lean`). Handlers
that all take 1.0 s land in the (1 s, 5 s] bin, whose log-scale midpoint is 2.2 s; their
mean puts the estimate at 1.0 s. The estimate never leaves its bin.

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
    """Per-bin counts of the run-time histogram (one per RUN_BOUNDS bound, one past the last)
    from its columns: the calls counted and how many took at most each RUN_BOUNDS bound."""
    bins = [b - a for a, b in zip((0, *cumulative), cumulative, strict=False)]
    return (*bins, count - (cumulative[-1] if cumulative else 0))


def percentile(
    counts: Sequence[int],
    fraction: float,
    bounds: Sequence[float] = BOUNDS,
    seconds: float | None = None,
) -> float | None:
    """The estimated time below which `fraction` of the counted jobs fall, with `counts` per
    bin of `bounds` and one past the last (BOUNDS for the wait, RUN_BOUNDS for the run);
    None when none were counted. `seconds`, the time all of them took together (the run's
    duration_sum), places the estimate within its bin; without it, a bin's calls are taken
    as spread evenly on a log scale. In the last bin it is that bin's lower edge, or the
    mean `seconds` leaves for it when higher."""
    total = sum(counts)
    if not total:
        return None
    rank = fraction * total
    seen = 0
    for index, count in enumerate(counts):
        if count and seen + count >= rank:
            mean = None if seconds is None else bin_mean(counts, bounds, index, seconds)
            if index == len(bounds):
                return max(bounds[-1], mean or 0.0)
            low = bounds[index - 1] if index else FLOOR
            share = (rank - seen) / count
            return within(low, bounds[index], share, lean(low, bounds[index], mean))
        seen += count
    return bounds[-1]


def bin_mean(counts: Sequence[int], bounds: Sequence[float], index: int, seconds: float) -> float:
    """The mean time of bin `index`'s jobs that `seconds` leaves after every other bin's
    jobs are counted at their bin's log-mean (the last, open bin's at its lower edge)."""
    others = sum(
        count * (bounds[-1] if i == len(bounds) else log_mean(bounds[i - 1] if i else FLOOR,
                                                              bounds[i]))
        for i, count in enumerate(counts)
        if count and i != index
    )  # fmt: skip
    return (seconds - others) / counts[index]


def log_mean(low: float, high: float) -> float:
    """The mean of times spread evenly on a log scale between `low` and `high`."""
    return (high - low) / math.log(high / low)


#: How far `lean` may tilt a bin: past it, the times sit at the bin's edge for any chart.
_STEEPEST = 500.0


def lean(low: float, high: float, mean: float | None) -> float:
    """The tilt k of the density exp(k * u) over a bin's log position u in [0, 1] whose mean
    time is `mean` (0: spread evenly, as without a mean; a mean outside the bin takes the
    steepest tilt toward its edge). Found by bisection: the mean grows with k."""
    if mean is None:
        return 0.0
    span = math.log(high / low)
    below, above = -_STEEPEST, _STEEPEST
    for _step in range(100):
        k = (below + above) / 2
        if low * _growth(k + span) / _growth(k) < mean:
            below = k
        else:
            above = k
    return (below + above) / 2


def _growth(x: float) -> float:
    """(e^x - 1) / x, 1 at 0."""
    return math.expm1(x) / x if abs(x) > 1e-12 else 1.0


def within(low: float, high: float, share: float, tilt: float) -> float:
    """The time below which `share` of a bin's jobs fall, with the bin's density tilted by
    `tilt` on its log scale (`lean`)."""
    if abs(tilt) < 1e-9:
        position = share
    else:
        inner = 1 + share * math.expm1(tilt)
        position = 1.0 if inner <= 0 else math.log1p(share * math.expm1(tilt)) / tilt
    position = min(max(position, 0.0), 1.0)
    return math.exp(math.log(low) + math.log(high / low) * position)


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
