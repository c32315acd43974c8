"""This hour's QueueStat sums per queue, read incrementally: the minutes that no worker
writes to any more are summed once per process and kept, so a scrape reads only the last
few minutes' rows (index alkqueue_stat_minute_idx), not up to 60 per queue.

Workers add to the minute their own clock is in, and the leader finishes the previous
minute's dead letter count at its next tick: a minute older than SETTLED is final, provided
the workers' and the web server's clocks agree within it. What is kept is a cache of the
tables, the same in every process, not a count of this process's own: the numbers stay the
cluster's (docs/operations.md, "Metrics").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Sum

from ...models import QueueStat

#: How old a minute must be before its row is taken as final.
SETTLED = timedelta(minutes=2)

Sums = dict[str, dict[str, float]]


class HourSums:
    """The settled part of the current hour, per database alias, behind one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: alias -> (the hour, the minutes summed are those before this one, their sums)
        self._settled: dict[str, tuple[datetime, datetime, Sums]] = {}

    def read(self, using: str, hour: datetime, now: datetime, columns: Sequence[str]) -> Sums:
        """Per queue, the sum of each of `columns` over the hour's minutes so far."""
        settled_before = max(hour, now.replace(second=0, microsecond=0) - SETTLED)
        with self._lock:
            kept_hour, upto, kept = self._settled.get(using, (hour, hour, {}))
            if kept_hour != hour or upto > settled_before:
                upto, kept = hour, {}
            fresh = _sums(using, columns, upto, settled_before)
            kept = _added(kept, fresh)
            self._settled[using] = (hour, settled_before, kept)
        return _added(kept, _sums(using, columns, settled_before, None))

    def clear(self) -> None:
        with self._lock:
            self._settled.clear()


def _sums(using: str, columns: Sequence[str], since: datetime, before: datetime | None) -> Sums:
    """Per queue, the sums over the minutes in [since, before) (no upper end with None)."""
    if before is not None and before <= since:
        return {}
    rows = QueueStat.objects.using(using).filter(minute__gte=since)
    if before is not None:
        rows = rows.filter(minute__lt=before)
    sums: Sums = {}
    for row in rows.values("queue").annotate(**{c: Sum(c) for c in columns}).order_by():
        values: dict[str, Any] = dict(row)
        sums[values["queue"]] = {c: values[c] or 0 for c in columns}
    return sums


def _added(a: Sums, b: Sums) -> Sums:
    """The sums of `a` and `b`, queue by queue and column by column; neither is changed
    (`a` itself is returned when `b` is empty)."""
    if not b:
        return a
    total = {name: dict(values) for name, values in a.items()}
    for name, values in b.items():
        into = total.setdefault(name, dict.fromkeys(values, 0))
        for column, value in values.items():
            into[column] = into.get(column, 0) + value
    return total


#: The web process's one cache.
hour_sums = HourSums()
