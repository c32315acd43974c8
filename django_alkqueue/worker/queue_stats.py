"""The QueueStat writers: one row per queue per minute, the data of the admin charts. Two
services write into the same rows:

- `QueueStatCountService` ("queue-stat-counts", leader only): the state counts read at
  that minute (waiting and throttled jobs among them), the dead letters that died in it,
  and the pruning of minutes older than ALKQUEUE["STATS_RETENTION"].
- `QueueStatDeltaService` ("alk-queue-stat-deltas", every worker): what this worker
  finished, failed and retried, how long its jobs waited and its handlers took, since its
  last flush, added to the current minute's row.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from itertools import accumulate

from django.db import connections, transaction
from django.db.models import Count
from django.db.models.functions import TruncMinute

from .. import timings
from ..conf import get_settings
from ..models import DeadLetter, QueueStat
from ..reports.flow_status import throttled_counts
from ..reports.queue_stats import minute_of
from ..reports.status import queue_overview
from ..reports.worker_stats import BOUNDS, WorkerStats
from ..sql import dialect_for
from ..sql.queue_stat_deltas import DELTA_COLUMNS, Delta

#: Seconds between two readings of the leader: at least one lands in every minute.
STATS_INTERVAL = 30.0

_COUNTS = ("pending", "scheduled", "claimed", "dead", "waiting", "throttled")


class QueueStatCountService:
    """The leader's tick: state counts and dead letters of the current minute, then pruning."""

    name = "queue-stat-counts"
    interval = STATS_INTERVAL

    def __init__(self, using: str) -> None:
        self.using = using

    def run_once(self, now: datetime) -> int:
        """Returns the number of queues whose minute was written."""
        minute = minute_of(now)
        died = self._dead_lettered(minute - timedelta(minutes=1))
        read = queue_overview(self.using, now)
        held = throttled_counts(self.using, now, {
            row.queue: (row.pending, row.claimed) for row in read if row.limited and row.pending
        })  # fmt: skip
        rows = [
            QueueStat(
                queue=row.queue,
                minute=minute,
                pending=row.pending,
                scheduled=row.scheduled,
                claimed=row.claimed,
                dead=row.dead,
                waiting=row.waiting,
                throttled=held.get(row.queue, 0),
                dead_lettered=died[(row.queue, minute)],
                read_at=now,
                oldest_pending_at=(
                    now - timedelta(seconds=row.oldest_pending_age) if row.pending else None
                ),
            )
            for row in read
        ]
        previous = {key: n for key, n in died.items() if key[1] != minute}
        # MySQL and MariaDB upsert on whichever unique key conflicts and refuse a target.
        features = connections[self.using].features
        target = ["queue", "minute"] if features.supports_update_conflicts_with_target else None
        with transaction.atomic(using=self.using):
            QueueStat.objects.using(self.using).bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=target,
                update_fields=[*_COUNTS, "dead_lettered", "read_at", "oldest_pending_at"],
            )
            # The previous minute's count is final now; its row exists if it had a reading.
            for (name, at), count in previous.items():
                QueueStat.objects.using(self.using).filter(queue=name, minute=at).update(
                    dead_lettered=count
                )
        retention = timedelta(seconds=get_settings().STATS_RETENTION)
        QueueStat.objects.using(self.using).filter(minute__lt=minute - retention).delete()
        return len(rows)

    def _dead_lettered(self, since: datetime) -> Counter[tuple[str, datetime]]:
        """Dead letters per (queue, minute) since `since` (index alkqueue_dead_died_idx)."""
        rows = (
            DeadLetter.objects.using(self.using)
            .filter(died_at__gte=since)
            .annotate(at=TruncMinute("died_at", tzinfo=UTC))
            .values_list("queue", "at")
            .annotate(n=Count("id"))
            .order_by()
        )
        return Counter({(name, at): n for name, at, n in rows})


class QueueStatDeltaService:
    """Every few seconds, add what this worker did since its last flush to the current minute.

    finished = jobs that succeeded (acked); failed = attempts that failed (retried or
    dead-lettered), as in the Worker row's jobs_failed; retried = those of them put back for
    another try; snoozed = jobs put back by Snooze; duration_* = its handler calls' durations,
    the one run-time histogram (the queue page's chart and /metrics/); wait_* = the wait
    histogram of its attempts (timings.py). All in DELTA_COLUMNS order, one upsert. A failed
    write keeps the deltas for the next flush.
    """

    name = "alk-queue-stat-deltas"

    def __init__(self, using: str, stats: WorkerStats, interval: float) -> None:
        self.using = using
        self.stats = stats
        self.interval = interval
        self._flushed: dict[str, tuple[float, ...]] = {}
        self._lock = threading.Lock()

    def run_once(self, now: datetime) -> int:
        """Returns the number of queues whose row was written."""
        with self._lock:
            totals = self._totals()
            deltas: list[Delta] = []
            for name, values in sorted(totals.items()):
                before = self._flushed.get(name, _NOTHING)
                delta = tuple(a - b for a, b in zip(values, before, strict=True))
                if any(delta):
                    deltas.append((name, delta))
            if deltas:
                self._write(minute_of(now), deltas)
            self._flushed = totals
            return len(deltas)

    def _totals(self) -> dict[str, tuple[float, ...]]:
        """Per queue, what this worker did since it started, in DELTA_COLUMNS order."""
        outcomes = self.stats.snapshot()
        durations = self.stats.duration_snapshot()
        waits = self.stats.wait_snapshot()
        totals = {}
        for name in outcomes.keys() | durations.keys() | waits.keys():
            done = outcomes.get(name, {})
            runs, seconds = durations.get(name, (_NO_RUNS, 0.0))
            totals[name] = (
                done.get("succeeded", 0), done.get("retried", 0) + done.get("dead", 0),
                done.get("snoozed", 0), done.get("retried", 0), sum(runs), seconds,
                *list(accumulate(runs))[: len(BOUNDS)], *waits.get(name, _NO_WAITS),
            )  # fmt: skip
        return totals

    def _write(self, minute: datetime, deltas: list[Delta]) -> None:
        connection = connections[self.using]
        dialect_for(connection).add_queue_stat_deltas(connection, minute, deltas)


_NO_RUNS = [0] * (len(BOUNDS) + 1)
_NO_WAITS = timings.empty()
_NOTHING = (0,) * len(DELTA_COLUMNS)
