"""What the QueueStat minutes say (worker/queue_stats.py writes them): the throughput of the
last minutes and hour, each queue's minutes for the admin's charts, and the leader's last
readings that the metrics and `alk_health --max-age` use."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from django.db.models import Max, Q, Subquery, Sum
from django.db.models.functions import TruncHour

from .. import timings
from ..models import QueueStat


def minute_of(now: datetime) -> datetime:
    """The QueueStat minute that `now` falls in."""
    return now.replace(second=0, microsecond=0)


@dataclasses.dataclass(frozen=True)
class Throughput:
    """Jobs finished (succeeded), failed attempts and snoozed jobs, over the current minute
    and those before."""

    finished_5m: int = 0
    failed_5m: int = 0
    finished_1h: int = 0
    failed_1h: int = 0
    snoozed_1h: int = 0


def throughput(using: str, now: datetime) -> dict[str, Throughput]:
    """Per queue: the last 5 and the last 60 QueueStat minutes (this one included). One query."""
    current = minute_of(now)
    recent = Q(minute__gte=current - timedelta(minutes=4))
    rows = (
        QueueStat.objects.using(using)
        .filter(minute__gte=current - timedelta(minutes=59))
        .values("queue")
        .annotate(
            finished_5m=Sum("finished", filter=recent),
            failed_5m=Sum("failed", filter=recent),
            finished_1h=Sum("finished"),
            failed_1h=Sum("failed"),
            snoozed_1h=Sum("snoozed"),
        )
        .order_by()
    )
    return {
        row["queue"]: Throughput(
            row["finished_5m"] or 0,
            row["failed_5m"] or 0,
            row["finished_1h"] or 0,
            row["failed_1h"] or 0,
            row["snoozed_1h"] or 0,
        )
        for row in rows
    }


@dataclasses.dataclass(frozen=True)
class StatPoint:
    """One QueueStat minute of one queue, as the charts read it."""

    minute: datetime
    depth: int
    finished: int
    failed: int
    dead_lettered: int
    pending: int = 0
    scheduled: int = 0
    claimed: int = 0
    #: The wait and run histograms (timings.py: BOUNDS and RUN_BOUNDS bins, the run's from
    #: the handler duration columns that /metrics/ reads too); empty when not read.
    wait: tuple[int, ...] = ()
    run: tuple[int, ...] = ()
    #: The seconds the run histogram's calls took in all (duration_sum).
    run_seconds: float = 0.0


_POINT_FIELDS = ("queue", "minute", "pending", "scheduled", "claimed", "finished", "failed",
                 "dead_lettered", *timings.WAIT_FIELDS, *timings.RUN_FIELDS,
                 "duration_sum")  # fmt: skip


def history(
    using: str,
    now: datetime,
    hours: float = 24,
    queue: str | None = None,
    queues: Collection[str] | None = None,
    with_times: bool = False,
) -> dict[str, list[StatPoint]]:
    """Per queue (`queue` alone, or those in `queues`), its QueueStat minutes of the last
    `hours`, oldest first (index on minute); `with_times` reads the wait and run
    histograms too."""
    stats = QueueStat.objects.using(using).filter(minute__gt=now - timedelta(hours=hours))
    if queue is not None:
        stats = stats.filter(queue=queue)
    if queues is not None:
        stats = stats.filter(queue__in=list(queues))
    series: dict[str, list[StatPoint]] = {}
    bins = timings.BINS
    fields = _POINT_FIELDS if with_times else _POINT_FIELDS[:8]
    for row in stats.order_by("queue", "minute").values_list(*fields):
        name, minute, pending, scheduled, claimed, finished, failed, dead = row[:8]
        runs = row[8 + bins : -1]
        point = StatPoint(
            minute, pending + scheduled + claimed, finished, failed, dead, pending, scheduled,
            claimed, tuple(row[8 : 8 + bins]),
            timings.run_bins(runs[0], runs[1:]) if runs else (), row[-1] if runs else 0.0,
        )  # fmt: skip
        series.setdefault(name, []).append(point)
    return series


def hourly_history(
    using: str, now: datetime, hours: float, queues: Collection[str]
) -> dict[str, list[StatPoint]]:
    """`history` summed by the hour in the database, one point per queue and hour: the
    hour's last minute with its state counts (the last reading, as charts.bucketize keeps)
    and the sums of the hour's finished, failed and dead-lettered jobs. For charts whose
    buckets are whole hours: a 7-day chart of 100 queues reads about 17,000 rows, not the
    million minutes behind them. Two queries, both on the unique (queue, minute) index."""
    since = now - timedelta(hours=hours)
    stats = QueueStat.objects.using(using).filter(minute__gt=since, queue__in=list(queues))
    hours_read = (
        stats.annotate(hour=TruncHour("minute", tzinfo=UTC))
        .values("queue", "hour")
        .annotate(last=Max("minute"), finished_sum=Sum("finished"), failed_sum=Sum("failed"),
                  dead_sum=Sum("dead_lettered"))
        .values_list("queue", "last", "finished_sum", "failed_sum", "dead_sum")
    )  # fmt: skip
    sums = {(name, last): figures for name, last, *figures in hours_read}
    lasts = stats.filter(minute__in={last for _, last in sums}).order_by("queue", "minute")
    series: dict[str, list[StatPoint]] = {}
    for name, minute, pending, scheduled, claimed in lasts.values_list(
        "queue", "minute", "pending", "scheduled", "claimed"
    ):
        summed = sums.get((name, minute))
        if summed is None:  # another queue's last minute of an hour, not this one's
            continue
        finished, failed, dead = summed
        point = StatPoint(minute, pending + scheduled + claimed, finished, failed, dead,
                          pending, scheduled, claimed)  # fmt: skip
        series.setdefault(name, []).append(point)
    return series


@dataclasses.dataclass(frozen=True)
class Reading:
    """The leader's last reading of one queue (QueueStatCountService, every 30 s): its state counts
    and the run_at of its oldest due job then."""

    queue: str
    read_at: datetime
    pending: int
    scheduled: int
    claimed: int
    dead: int
    oldest_pending_at: datetime | None
    #: Jobs waiting for their dependencies (not in `scheduled`) and due jobs flow control
    #: held back (a part of `pending`).
    waiting: int = 0
    throttled: int = 0

    def oldest_pending_age(self) -> float:
        """Seconds the oldest due job had waited past its run_at when read; 0 when none."""
        if self.oldest_pending_at is None:
            return 0.0
        return max((self.read_at - self.oldest_pending_at).total_seconds(), 0.0)


#: How far back a reading is looked for: the leader reads every queue twice a minute.
READINGS_WITHIN = timedelta(minutes=2)


def latest_readings(using: str, now: datetime) -> dict[str, Reading]:
    """Per queue, the leader's newest reading: the rows of the newest minute of the last
    READINGS_WITHIN that has one (the leader writes every queue's reading in one
    transaction), so as many rows as queues, found over alkqueue_stat_minute_idx whatever
    the size of the live table. Empty when no leader has read the queues lately."""
    read = QueueStat.objects.using(using).filter(read_at__isnull=False)
    newest = read.filter(minute__gte=minute_of(now) - READINGS_WITHIN).order_by("-minute")
    rows = read.filter(minute=Subquery(newest.values("minute")[:1])).values_list(
        "queue", "read_at", "pending", "scheduled", "claimed", "dead", "oldest_pending_at",
        "waiting", "throttled",
    )  # fmt: skip
    return {
        name: Reading(name, read_at, pending, scheduled, claimed, dead, oldest, waiting, held)
        for name, read_at, pending, scheduled, claimed, dead, oldest, waiting, held in rows
        if read_at is not None
    }
