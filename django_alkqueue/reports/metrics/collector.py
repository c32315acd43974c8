"""What a scrape reads, at scrape time, from the tables every worker writes: so the numbers
are the cluster's, however many worker processes there are, and nothing is kept in the web
process (docs/operations.md, "Metrics", says why this over prometheus_client's
multiprocess mode).

Nothing here counts the live table: the depth by state and the oldest pending age are the
leader's last reading of each queue (QueueStat, every 30 s; queue_stats.latest_readings), so a
scrape costs the same at 1,000 rows or 1M (docs/benchmarks.md, "The scrape").

The job counters and the handler duration histogram come from the QueueStat minutes of the
current hour: each minute's row only grows while its hour lasts, so the sums are counters
that start again at every full hour, with that hour as their created time. A query over one
hour of minutes stays small whatever the retention, and Prometheus's rate() and increase()
read the restart as a counter reset.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.apps import apps
from django.db import connections
from django.db.models import Count, Q

from ...conf import get_settings
from ...models import DURATION_BUCKETS, Consumer, Worker
from ...sql import dialect_for
from ..queue_stats import latest_readings
from .exposition import Exposition, label
from .hour_sums import hour_sums

#: The QueueStat columns exposed as counters, with what each counts.
COUNTERS = {
    "finished": "Jobs that succeeded (acked), this hour.",
    "failed": "Attempts that failed (retried or dead-lettered by a worker), this hour.",
    "retried": "Failed attempts put back for another try (a part of failed), this hour.",
    "dead_lettered": "Jobs that became dead letters (failed, out of attempts, expired), this hour.",
}
#: The QueueStat columns of the handler duration histogram besides its buckets.
HISTOGRAM_COLUMNS = ("duration_count", "duration_sum", *(c for _, c in DURATION_BUCKETS))
#: Each bucket's `le` label, as prometheus_client writes a bound (0.005, 1.0, 300.0).
_BUCKET_LABELS = tuple((label("le", repr(bound)), column) for bound, column in DURATION_BUCKETS)
_STATES = ("pending", "scheduled", "waiting", "claimed", "dead")
_STATE_LABELS = tuple((state, label("state", state)) for state in _STATES)


def hour_of(now: datetime) -> datetime:
    """The start of the hour the counters of `now` belong to."""
    return now.replace(minute=0, second=0, microsecond=0)


def scrape(using: str, now: datetime) -> str:
    """The whole exposition: queues, job counters, workers, tables."""
    out = Exposition()
    queue_metrics(out, using, now)
    counters(out, using, now)
    worker_metrics(out, using, now)
    table_metrics(out, using)
    return out.text()


def queue_metrics(out: Exposition, using: str, now: datetime) -> None:
    """Depth by state, throttled jobs and the oldest pending job's age, per queue, as the
    leader last read them (at most READINGS_WITHIN old); the paused flag from the Consumer rows."""
    readings = sorted(latest_readings(using, now).items())
    out.family("alkqueue_jobs", "gauge",
               "Jobs per queue and state, at the leader's last reading (every 30 s).")  # fmt: skip
    for name, reading in readings:
        queue = label("queue", name)
        for state, state_label in _STATE_LABELS:
            out.sample("alkqueue_jobs", f"{queue},{state_label}", getattr(reading, state))
    out.family("alkqueue_jobs_throttled", "gauge",
               "Due jobs flow control held back (a full concurrency cap or a spent rate) at "
               "the leader's last reading; a part of the pending ones.")  # fmt: skip
    for name, reading in readings:
        out.sample("alkqueue_jobs_throttled", label("queue", name), reading.throttled)
    out.family("alkqueue_oldest_pending_age_seconds", "gauge",
               "Seconds the oldest due job had waited past its run_at at the leader's last "
               "reading; 0 when none waited.")  # fmt: skip
    for name, reading in readings:
        out.sample("alkqueue_oldest_pending_age_seconds", label("queue", name),
                   reading.oldest_pending_age())  # fmt: skip
    out.family("alkqueue_queue_read_age_seconds", "gauge",
               "Seconds since the leader's last reading of the queue.")  # fmt: skip
    for name, reading in readings:
        out.sample("alkqueue_queue_read_age_seconds", label("queue", name),
                   max((now - reading.read_at).total_seconds(), 0.0))  # fmt: skip
    out.family("alkqueue_queue_paused", "gauge", "1 while the queue's consumer is paused.")
    consumers = Consumer.objects.using(using).order_by("queue")
    for name, paused in consumers.values_list("queue", "paused"):
        out.sample("alkqueue_queue_paused", label("queue", name), int(paused))


def counters(out: Exposition, using: str, now: datetime) -> None:
    """The QueueStat sums of this hour (hour_sums: the last few minutes read, the settled
    ones kept): the job counters and the handler duration histogram."""
    hour = hour_of(now)
    created = hour.timestamp()
    columns = [*COUNTERS, *HISTOGRAM_COLUMNS]
    sums = [
        (label("queue", name), values)
        for name, values in sorted(hour_sums.read(using, hour, now, columns).items())
    ]
    for column, help_text in COUNTERS.items():
        name = f"alkqueue_jobs_{column}"
        out.family(f"{name}_total", "counter", help_text)
        for queue, values in sums:
            out.sample(f"{name}_total", queue, values[column])
        out.family(f"{name}_created", "gauge", help_text)
        for queue, _ in sums:
            out.sample(f"{name}_created", queue, created)
    name = "alkqueue_handler_duration_seconds"
    out.family(name, "histogram",
               "Seconds each handler call took (a batch consumer's call counts once), "
               "this hour.")  # fmt: skip
    for queue, values in sums:
        for le, column in _BUCKET_LABELS:
            out.sample(f"{name}_bucket", f"{le},{queue}", values[column])
        out.sample(f"{name}_bucket", f'le="+Inf",{queue}', values["duration_count"])
        out.sample(f"{name}_count", queue, values["duration_count"])
        out.sample(f"{name}_sum", queue, values["duration_sum"])


def worker_metrics(out: Exposition, using: str, now: datetime) -> None:
    """Worker processes by heartbeat state, and whether a live one leads: one query of the
    Worker table (a row per worker process)."""
    stale_after = get_settings().WORKER_STALE_AFTER
    fresh = Q(last_heartbeat_at__gte=now - timedelta(seconds=stale_after))
    counts = Worker.objects.using(using).aggregate(
        live=Count("id", filter=fresh),
        stale=Count("id", filter=~fresh),
        leaders=Count("id", filter=fresh & Q(is_leader=True)),
    )
    out.family("alkqueue_workers", "gauge", "Worker processes by heartbeat state.")
    out.sample("alkqueue_workers", 'state="live"', counts["live"])
    out.sample("alkqueue_workers", 'state="stale"', counts["stale"])
    out.family("alkqueue_leader", "gauge", "1 while a live worker is the leader.")
    out.sample("alkqueue_leader", "", int(counts["leaders"] > 0))


def queue_tables() -> list[str]:
    """Every table of the app: the live table, dead letters, history, stats, workers,
    flow control, workflows, task results; a table a later release adds is among them."""
    models = apps.get_app_config("django_alkqueue").get_models()
    return sorted(model._meta.db_table for model in models)


def table_metrics(out: Exposition, using: str) -> None:
    """Dead row versions of each queue table where the server counts them (PostgreSQL's
    statistics, the one the leader's vacuum reads among them; the history's day
    partitions as one figure): one query of the statistics, no table read."""
    connection = connections[using]
    dead = dialect_for(connection).table_dead_tuples(connection, queue_tables())
    if dead is None:
        return
    out.family("alkqueue_dead_tuples", "gauge",
               "Dead row versions in a queue table, as the server counts them.")  # fmt: skip
    for table, count in sorted(dead.items()):
        out.sample("alkqueue_dead_tuples", label("table", table), count)
