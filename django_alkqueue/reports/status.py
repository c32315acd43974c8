"""The numbers an operator needs, computed once for `alk_status` and the admin overview."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, Subquery, Sum, TextField
from django.db.models.functions import Cast, TruncHour
from django.utils.http import urlencode

from .. import error_groups, task_queues, timings
from ..conf import get_settings
from ..consumers import registry
from ..jobs import Progress, stored_progress
from ..models import (
    Consumer,
    DeadLetter,
    JobStep,
    QueueMessage,
    QueueStat,
    Worker,
)
from ..sql import dialect_for
from ..steps import SLEEP_UNTIL
from . import flow_status
from .flow_status import FlowFigures, in_force


@dataclasses.dataclass(frozen=True)
class QueueRow:
    queue: str
    #: The handler a worker bound (the Consumer row), else the one the code binds.
    handler: str | None
    paused: bool
    pending: int
    scheduled: int
    claimed: int
    dead: int
    oldest_pending_age: float
    #: Live jobs waiting for their dependencies (docs/workflows.md) or for a signal
    #: (docs/durable-steps.md); not in `scheduled`.
    waiting: int = 0
    #: The scheduled jobs that sleep (job.sleep): counted in `scheduled` too (sleeping_counts).
    sleeping: int = 0
    #: A worker has served the queue (it wrote the Consumer row). False with a handler: the
    #: code binds one, but no worker has started on the queue yet.
    served: bool = False
    #: Flow control: each limit in force as text (None: no limit), and where each comes
    #: from (code, settings, override); flow_status has the figures that go with them.
    limits: dict[str, str | None] = dataclasses.field(default_factory=dict)
    limit_sources: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def limited(self) -> bool:
        return any(value is not None for value in self.limits.values())


def code_handler(name: str) -> str | None:
    """The dotted path of the handler this process's code binds to queue `name`: its
    @consumer, or the Tasks backend's runner for a task queue; None when there is none."""
    spec = registry.get(name)
    if spec is not None:
        return spec.path
    task = task_queues.spec(name)
    return task.path if task is not None else None


@dataclasses.dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    hostname: str
    pid: int
    queues: list[str]
    concurrency: int
    started_at: datetime
    last_heartbeat_at: datetime
    jobs_processed: int
    jobs_failed: int
    is_leader: bool
    stale: bool


def live_counts(using: str, now: datetime) -> dict[str, dict[str, Any]]:
    """Per queue with live jobs: pending, scheduled, waiting, claimed and sleeping counts
    and the oldest due run_at. Three queries: two each over one partial index and only its
    columns (queue, run_at), so PostgreSQL can answer them from the index alone: the
    unclaimed rows from alkqueue_pending_idx, the claimed ones from alkqueue_lease_idx;
    then sleeping_counts."""
    due = Q(run_at__lte=now)
    live: dict[str, dict[str, Any]] = {
        row["queue"]: {**row, "claimed": 0}
        for row in QueueMessage.objects.using(using)
        .unclaimed()
        .values("queue")
        .annotate(
            pending=Count("queue", filter=due),
            scheduled=Count("queue", filter=Q(run_at__gt=now)),
            waiting=Count("queue", filter=Q(run_at__isnull=True)),
            oldest=Min("run_at", filter=due),
        )
        .order_by()
    }
    claimed = QueueMessage.objects.using(using).claimed().values_list("queue")
    for name, n in claimed.annotate(n=Count("queue")).order_by():
        row = live.setdefault(
            name, {"queue": name, "pending": 0, "scheduled": 0, "waiting": 0, "oldest": None}
        )
        row["claimed"] = n
    for name, n in sleeping_counts(using, now).items():
        live[name]["sleeping"] = n
    return live


def sleeping_counts(using: str, now: datetime) -> dict[str, int]:
    """Per queue, the scheduled jobs that sleep: those whose last recorded step is a
    job.sleep (its value holds SLEEP_UNTIL). One query: the scheduled rows of
    alkqueue_pending_idx, each probing its steps by the unique index (job_id, name). A job
    woken whose handler failed before recording another step, scheduled for its retry,
    still counts as sleeping (docs/admin.md)."""
    steps = JobStep.objects.using(using)
    later = steps.filter(job_id=OuterRef("job_id"), recorded_at__gt=OuterRef("recorded_at"))
    # The column is JSON text (fields.PayloadField): a sleep's record starts with its key.
    slept = steps.annotate(text=Cast("value", TextField())).filter(
        job_id=OuterRef("pk"), text__startswith=f'{{"{SLEEP_UNTIL}":'
    )
    rows = (
        QueueMessage.objects.using(using)
        .unclaimed()
        .filter(run_at__gt=now)
        .filter(Exists(slept.exclude(Exists(later))))
        .values_list("queue")
        .annotate(n=Count("queue"))
        .order_by()
    )
    return dict(rows)


def queue_overview(using: str, now: datetime) -> list[QueueRow]:
    """One row per queue known from live jobs, dead letters or consumers. Four queries, over
    indexes (live_counts; alkqueue_dead_queue_idx) and the consumers."""
    live = live_counts(using, now)
    dead = dict(
        DeadLetter.objects.using(using).values_list("queue").annotate(n=Count("queue")).order_by()
    )
    consumers = {c.queue: c for c in Consumer.objects.using(using).all()}
    rows = []
    for name in sorted(set(live) | set(dead) | set(consumers)):
        counts = live.get(name, {})
        oldest = counts.get("oldest")
        consumer = consumers.get(name)
        limits = in_force(name, *((consumer.code_limits, consumer.limit_overrides)
                                  if consumer else (None, None)))  # fmt: skip
        rows.append(
            QueueRow(
                queue=name,
                handler=consumer.handler if consumer else code_handler(name),
                paused=bool(consumer and consumer.paused),
                served=consumer is not None,
                pending=counts.get("pending", 0),
                scheduled=counts.get("scheduled", 0),
                waiting=counts.get("waiting", 0),
                sleeping=counts.get("sleeping", 0),
                claimed=counts.get("claimed", 0),
                dead=dead.get(name, 0),
                oldest_pending_age=max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
                limits=limits.limits.describe(),
                limit_sources=dict(limits.sources),
            )
        )
    return rows


def flow_overview(using: str, now: datetime, rows: Collection[QueueRow]) -> dict[str, FlowFigures]:
    """The flow figures of the queues among `rows` that have limits in force: one query for
    their Consumer rows, then two to four indexed queries each; none without limits."""
    limited = {row.queue: row for row in rows if row.limited}
    if not limited:
        return {}
    stored = {
        queue: (code, overrides)
        for queue, code, overrides in Consumer.objects.using(using)
        .filter(queue__in=list(limited))
        .values_list("queue", "code_limits", "limit_overrides")
    }
    return {
        name: flow_status.figures(
            using,
            name,
            now,
            in_force(name, *stored.get(name, (None, None))),
            row.pending,
            row.claimed,
        )
        for name, row in limited.items()
    }


def worker_overview(using: str, now: datetime) -> list[WorkerRow]:
    stale_after = get_settings().WORKER_STALE_AFTER
    return [
        WorkerRow(
            worker_id=w.worker_id,
            hostname=w.hostname,
            pid=w.pid,
            queues=list(w.queues),
            concurrency=w.concurrency,
            started_at=w.started_at,
            last_heartbeat_at=w.last_heartbeat_at,
            jobs_processed=w.jobs_processed,
            jobs_failed=w.jobs_failed,
            is_leader=w.is_leader,
            stale=(now - w.last_heartbeat_at).total_seconds() > stale_after,
        )
        for w in Worker.objects.using(using).order_by("worker_id")
    ]


@dataclasses.dataclass(frozen=True)
class RunningRow:
    """A claimed job whose handler reported progress (job.progress())."""

    job_id: int
    queue: str
    worker_id: str | None
    claimed_at: datetime | None
    progress: Progress


#: The most running jobs alk_status lists.
RUNNING_SHOWN = 20


def running_overview(using: str, limit: int = RUNNING_SHOWN) -> list[RunningRow]:
    """The running jobs with progress, the latest reports first; claimed rows only
    (alkqueue_lease_idx holds them)."""
    rows = (
        QueueMessage.objects.using(using)
        .claimed()
        .filter(progress_at__isnull=False)
        .order_by("-progress_at")
        .values_list("id", "queue", "claimed_by", "claimed_at", "progress", "progress_at")
    )
    running = []
    for job_id, queue, worker_id, claimed_at, stored, at in rows[:limit]:
        progress = stored_progress(stored, at)
        if progress is not None:
            running.append(RunningRow(job_id, queue, worker_id, claimed_at, progress))
    return running


# -- figures over the QueueStat minutes (the admin overview and its charts) -------------------


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


# -- error groups --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ErrorGroup:
    """Dead letters with one error fingerprint (error_groups.py)."""

    fingerprint: str
    #: "ExceptionClass: message" with the message's variable parts as placeholders.
    title: str
    #: The application frame that raised ("shop/emails.py in send"), "" when unknown.
    frame: str
    #: The reason of the group's latest dead letter.
    reason: str
    count: int
    first_seen: datetime
    last_seen: datetime
    #: The queues holding the group's dead letters, most dead letters first.
    queues: list[str]
    #: The queue the group was counted in; None: every queue.
    scope: str | None = None

    @property
    def group_query(self) -> str:
        """The dead letter changelist's query that selects exactly the group's letters."""
        scope = {} if self.scope is None else {"queue": self.scope}
        return urlencode({**scope, "error": self.fingerprint})


def frequent_errors(using: str, queue: str | None = None, limit: int = 10) -> list[ErrorGroup]:
    """The `limit` largest error groups among the dead letters of `queue` (or of every
    queue), largest first. One GROUP BY over alkqueue_dead_error_idx (queue,
    error_fingerprint, died_at), whose rows are (queue, group) pairs, then one index probe
    per group shown for its latest dead letter, whose error text names the group."""
    dead = DeadLetter.objects.using(using).filter(error_fingerprint__isnull=False)
    if queue is not None:
        dead = dead.filter(queue=queue)
    pairs = (
        dead.values_list("error_fingerprint", "queue")
        .annotate(n=Count("*"), first=Min("died_at"), last=Max("died_at"))
        .order_by()
    )
    merged: dict[str, list[tuple[int, str, datetime, datetime]]] = {}
    for print_, name, n, first, last in pairs:
        merged.setdefault(print_, []).append((n, name, first, last))
    largest = sorted(merged.items(), key=lambda item: -sum(n for n, *_ in item[1]))[:limit]
    return [_error_group(using, print_, parts, queue) for print_, parts in largest]


def _error_group(
    using: str, print_: str, parts: list[tuple[int, str, datetime, datetime]], scope: str | None
) -> ErrorGroup:
    latest_queue = max(parts, key=lambda part: part[3])[1]
    text, reason = (
        DeadLetter.objects.using(using)
        .filter(queue=latest_queue, error_fingerprint=print_)
        .order_by("-died_at")
        .values_list("last_error", "reason")
        .first()
    ) or ("", "")
    found = error_groups.signature(text or reason)
    return ErrorGroup(
        fingerprint=print_,
        title=found.title,
        frame=found.frame,
        reason=reason,
        count=sum(n for n, *_ in parts),
        first_seen=min(first for _, _, first, _ in parts),
        last_seen=max(last for *_, last in parts),
        queues=[name for _, name, *_ in sorted(parts, key=lambda part: (-part[0], part[1]))],
        scope=scope,
    )


# -- queue names and each queue's oldest pending job, cheaply ----------------------------------


def known_queues(using: str) -> list[str]:
    """Every queue named by a consumer, a live job or a dead letter, sorted; no table scan
    (Dialect.known_queues)."""
    connection = connections[using]
    return dialect_for(connection).known_queues(connection)


def oldest_pending_ages(
    using: str, now: datetime, queues: Collection[str] | None = None
) -> dict[str, float]:
    """Seconds the oldest due job of each queue has waited past its run_at: only queues with a
    due job appear. One statement of index probes (Dialect.first_unclaimed_run_at); `queues`
    limits it to those queues, and an empty collection reads nothing."""
    if queues is not None and not queues:
        return {}
    connection = connections[using]
    first = dialect_for(connection).first_unclaimed_run_at(connection, queues)
    return {name: (now - at).total_seconds() for name, at in first.items() if at <= now}
