"""The QueueStat writers: one row per queue per minute, the data of the admin charts.

- `QueueStatWriter` (leader only): the state counts read at that minute, the dead letters
  that died in it, and the pruning of minutes older than ALKQUEUE["STATS_RETENTION"].
- `QueueStatDeltas` (every worker): what this worker finished and failed since its last
  flush, added to the current minute's row.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

from django.db import connections, transaction
from django.db.models import Count
from django.db.models.functions import TruncMinute

from ..conf import get_settings
from ..models import DeadLetter, QueueStat
from ..sql import dialect_for
from ..status import minute_of, queue_overview
from .stats import WorkerStats

#: Seconds between two readings of the leader: at least one lands in every minute.
STATS_INTERVAL = 30.0

_COUNTS = ("pending", "scheduled", "claimed", "dead")


class QueueStatWriter:
    """The leader's tick: state counts and dead letters of the current minute, then pruning."""

    name = "queue-stats"
    interval = STATS_INTERVAL

    def __init__(self, using: str) -> None:
        self.using = using

    def run_once(self, now: datetime) -> int:
        """Returns the number of queues whose minute was written."""
        minute = minute_of(now)
        died = self._dead_lettered(minute - timedelta(minutes=1))
        rows = [
            QueueStat(
                queue=row.queue,
                minute=minute,
                pending=row.pending,
                scheduled=row.scheduled,
                claimed=row.claimed,
                dead=row.dead,
                dead_lettered=died[(row.queue, minute)],
            )
            for row in queue_overview(self.using, now)
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
                update_fields=[*_COUNTS, "dead_lettered"],
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


class QueueStatDeltas:
    """Every few seconds, add what this worker finished and failed to the current minute.

    finished = jobs that succeeded (acked); failed = attempts that failed (retried or
    dead-lettered), as in the Worker row's jobs_failed; snoozed = jobs put back by Snooze.
    A failed write keeps the deltas for the next flush.
    """

    name = "alk-queue-stats"

    def __init__(self, using: str, stats: WorkerStats, interval: float) -> None:
        self.using = using
        self.stats = stats
        self.interval = interval
        self._flushed: dict[str, Counter[str]] = {}
        self._lock = threading.Lock()

    def run_once(self, now: datetime) -> int:
        """Returns the number of queues whose row was written."""
        with self._lock:
            snapshot = self.stats.snapshot()
            deltas = []
            for name, outcomes in snapshot.items():
                done = self._flushed.get(name, Counter())
                finished = outcomes["succeeded"] - done["succeeded"]
                failed = outcomes["retried"] + outcomes["dead"] - done["retried"] - done["dead"]
                snoozed = outcomes["snoozed"] - done["snoozed"]
                if finished or failed or snoozed:
                    deltas.append((name, finished, failed, snoozed))
            if deltas:
                self._write(minute_of(now), deltas)
            self._flushed = {name: Counter(outcomes) for name, outcomes in snapshot.items()}
            return len(deltas)

    def _write(self, minute: datetime, deltas: list[tuple[str, int, int, int]]) -> None:
        connection = connections[self.using]
        dialect_for(connection).add_queue_stat_deltas(connection, minute, deltas)
