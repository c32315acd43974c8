"""What a scrape reads, at scrape time, from the tables every worker writes: so the numbers
are the cluster's, however many worker processes there are, and nothing is kept in the web
process (docs/operations.md, "Metrics", says why this over prometheus_client's
multiprocess mode).

The job counters come from the QueueStat minutes of the current hour: each minute's row only
grows while its hour lasts, so the sums are counters that start again at every full hour,
with that hour as their created time. A query over one hour of minutes stays small whatever
the retention, and Prometheus's rate() and increase() read the restart as a counter reset.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..clock import Clock
from ..conf import get_settings
from ..models import MESSAGE_TABLE, QueueStat, Worker
from ..sql import dialect_for
from ..status import queue_overview

#: The QueueStat columns exposed as counters, with what each counts.
COUNTERS = {
    "finished": "Jobs that succeeded (acked), this hour.",
    "failed": "Attempts that failed (retried or dead-lettered by a worker), this hour.",
    "dead_lettered": "Jobs that became dead letters (failed, out of attempts, expired), this hour.",
}


def hour_of(now: datetime) -> datetime:
    """The start of the hour the counters of `now` belong to."""
    return now.replace(minute=0, second=0, microsecond=0)


class QueueCollector(Collector):
    def __init__(self, using: str, clock: Clock) -> None:
        self.using = using
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        yield from self.queue_metrics(now)
        yield from self.counters(now)
        yield from self.worker_metrics(now)
        yield from self.table_metrics()

    def queue_metrics(self, now: datetime) -> Iterator[Metric]:
        """Depth by state, the oldest pending job's age and the paused flag, per queue."""
        depth = GaugeMetricFamily(
            "alkqueue_jobs", "Jobs per queue and state.", labels=["queue", "state"]
        )
        oldest = GaugeMetricFamily(
            "alkqueue_oldest_pending_age_seconds",
            "Seconds the oldest due job has waited past its run_at; 0 when none waits.",
            labels=["queue"],
        )
        paused = GaugeMetricFamily(
            "alkqueue_queue_paused", "1 while the queue's consumer is paused.", labels=["queue"]
        )
        for row in queue_overview(self.using, now):
            for state in ("pending", "scheduled", "claimed", "dead"):
                depth.add_metric([row.queue, state], getattr(row, state))
            oldest.add_metric([row.queue], row.oldest_pending_age)
            paused.add_metric([row.queue], int(row.paused))
        yield from (depth, oldest, paused)

    def counters(self, now: datetime) -> Iterator[Metric]:
        """The QueueStat sums of this hour (index alkqueue_stat_minute_idx: one hour of it)."""
        hour = hour_of(now)
        families = {
            column: CounterMetricFamily(f"alkqueue_jobs_{column}", help_text, labels=["queue"])
            for column, help_text in COUNTERS.items()
        }
        rows = (
            QueueStat.objects.using(self.using)
            .filter(minute__gte=hour)
            .values("queue")
            .annotate(**{column: Sum(column) for column in COUNTERS})
            .order_by("queue")
        )
        for row in rows:
            sums: dict[str, Any] = dict(row)
            for column, family in families.items():
                family.add_metric([sums["queue"]], sums[column] or 0, created=hour.timestamp())
        yield from families.values()

    def worker_metrics(self, now: datetime) -> Iterator[Metric]:
        """Worker processes by heartbeat state, and whether a live one leads (Worker table)."""
        stale_after = get_settings().WORKER_STALE_AFTER
        workers = Worker.objects.using(self.using)
        live = workers.live(now, stale_after)
        states = GaugeMetricFamily(
            "alkqueue_workers", "Worker processes by heartbeat state.", labels=["state"]
        )
        states.add_metric(["live"], live.count())
        states.add_metric(["stale"], workers.stale(now, stale_after).count())
        leader = GaugeMetricFamily("alkqueue_leader", "1 while a live worker is the leader.")
        leader.add_metric([], int(live.filter(is_leader=True).exists()))
        yield from (states, leader)

    def table_metrics(self) -> Iterator[Metric]:
        """Dead row versions of the live table where the server counts them (PostgreSQL: the
        statistic the leader's vacuum reads)."""
        connection = connections[self.using]
        dead = dialect_for(connection).dead_tuples(connection)
        if dead is None:
            return
        family = GaugeMetricFamily(
            "alkqueue_dead_tuples",
            "Dead row versions in a queue table, as the server counts them.",
            labels=["table"],
        )
        family.add_metric([MESSAGE_TABLE], dead)
        yield family
