"""What a scrape and alk_health cost: they never read the live table, their QueueStat reads
go through the minute index, and the hour's settled minutes are summed once per process
(hour_sums). The figures at 1M rows and 1,000 queues are bench/observability.py's."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_alkqueue.models import QueueStat
from django_alkqueue.reports import health
from django_alkqueue.reports.metrics.collector import HISTOGRAM_COLUMNS, hour_of
from django_alkqueue.reports.metrics.hour_sums import HourSums, hour_sums
from django_alkqueue.worker.queue_stats import QueueStatCountService
from tests.conftest import fill_ten_queues

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_kept_sums() -> None:
    hour_sums.clear()


def scrape_queries(root: Client) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert root.get("/metrics/").status_code == 200
    return [q["sql"] for q in queries.captured_queries]


def reads_the_live_table(sql: str) -> bool:
    """A statement that reads alkqueue_message's rows (the server's statistics do not)."""
    return reads_rows_of("alkqueue_message", sql)


def reads_rows_of(table: str, sql: str) -> bool:
    """A statement that reads `table`'s rows, not the server's statistics naming it."""
    return table in sql and "pg_stat_user_tables" not in sql


def test_a_scrape_never_reads_the_live_table(root: Client, make_queue, clock):
    make_queue("q").enqueue({})
    QueueStatCountService("default").run_once(timezone.now())
    assert [sql for sql in scrape_queries(root) if reads_the_live_table(sql)] == []


def test_alk_health_with_max_age_probes_no_queue_the_leader_read_as_fine(make_queue, clock):
    make_queue("q").enqueue({})
    QueueStatCountService("default").run_once(clock.now)
    with CaptureQueriesContext(connection) as queries:
        problems = health.queue_problems("default", clock.now, 3600.0)
    assert problems == []
    assert [q["sql"] for q in queries.captured_queries if reads_the_live_table(q["sql"])] == []


def fill_stat_minutes(queues: int, minutes: int, now: datetime) -> None:
    """QueueStat rows of `queues` queues over the last `minutes` minutes, then ANALYZE."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=minutes - 1)
    rows = [(f"q{q}", start + timedelta(minutes=m)) for q in range(queues) for m in range(minutes)]
    columns = ", ".join(f.column for f in QueueStat._meta.concrete_fields if f.column != "id")
    zeros = ", ".join(
        "%s" if f.column in ("queue", "minute") else ("NULL" if f.null else "0")
        for f in QueueStat._meta.concrete_fields
        if f.column != "id"
    )
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO alkqueue_queuestat ({columns}) VALUES ({zeros})",
            [(name, connection.ops.adapt_datetimefield_value(at)) for name, at in rows],
        )
        cursor.execute("ANALYZE")


def test_the_scrapes_stat_reads_use_the_minute_index_on_120k_stat_rows(is_postgres, root):
    if not is_postgres:
        pytest.skip("PostgreSQL's plans (SQLite's below)")
    now = timezone.now()
    with connection.cursor() as cursor:
        fill_ten_queues(cursor)
    # Twenty hours of minutes, as a table that keeps days of them holds: the hour's sums then
    # read at most 5% of the rows whatever the minute of the hour (two hours made the plan
    # depend on it, and after :50 a sequential scan of half the table was rightly cheaper).
    fill_stat_minutes(100, 1200, now)
    QueueStatCountService("default").run_once(now)
    stat_reads = [sql for sql in scrape_queries(root) if reads_rows_of("alkqueue_queuestat", sql)]
    assert len(stat_reads) >= 2  # the readings and the hour's sums
    with connection.cursor() as cursor:
        for sql in stat_reads:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "alkqueue_stat_minute_idx" in plan, plan
            assert "Seq Scan" not in plan, plan


def test_on_sqlite_the_scrapes_stat_reads_search_an_index_on_120k_stat_rows(root):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plans")
    now = timezone.now()
    fill_stat_minutes(1000, 120, now)
    QueueStatCountService("default").run_once(now)
    stat_reads = [sql for sql in scrape_queries(root) if reads_rows_of("alkqueue_queuestat", sql)]
    assert len(stat_reads) >= 2  # the readings and the hour's sums
    with connection.cursor() as cursor:
        for sql in stat_reads:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            steps = [str(row[-1]) for row in cursor.fetchall()]
            reads = [s for s in steps if "alkqueue_queuestat" in s]
            # The minute index, or a skip scan of (queue, minute) seeking each queue's minutes.
            assert reads and all(s.startswith("SEARCH") for s in reads), steps


# -- the hour's sums, kept --------------------------------------------------------------------


def stat(queue: str, minute: datetime, finished: int) -> None:
    QueueStat.objects.update_or_create(queue=queue, minute=minute, defaults={"finished": finished})


def finished(sums: HourSums, hour: datetime, now: datetime) -> dict[str, float]:
    read = sums.read("default", hour, now, ["finished", *HISTOGRAM_COLUMNS])
    return {name: values["finished"] for name, values in read.items()}


def test_the_settled_minutes_are_summed_once_and_the_open_ones_at_every_read():
    hour = hour_of(timezone.now()) - timedelta(hours=1)
    sums = HourSums()
    for m in range(10):
        stat("q", hour + timedelta(minutes=m), 1)
    now = hour + timedelta(minutes=9, seconds=30)
    assert finished(sums, hour, now) == {"q": 10}

    # Minute 2 is settled (kept); minute 9 is open (read again).
    stat("q", hour + timedelta(minutes=2), 100)
    stat("q", hour + timedelta(minutes=9), 5)

    assert finished(sums, hour, now) == {"q": 14}
    assert finished(HourSums(), hour, now) == {"q": 113}  # a fresh process reads it all


def test_the_sums_start_again_at_the_next_hour():
    hour = hour_of(timezone.now()) - timedelta(hours=2)
    sums = HourSums()
    stat("q", hour + timedelta(minutes=30), 7)
    assert finished(sums, hour, hour + timedelta(minutes=40)) == {"q": 7}
    next_hour = hour + timedelta(hours=1)
    stat("q", next_hour + timedelta(minutes=1), 2)
    assert finished(sums, next_hour, next_hour + timedelta(minutes=5)) == {"q": 2}
