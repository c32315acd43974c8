"""The history's day partitions on PostgreSQL (sql/postgresql/history.py): made ahead
by the leader, a DEFAULT partition for days without one, whole partitions dropped once all
their rows are past their keep, and expired rows of the others deleted in batches."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections, transaction

from django_alkqueue import operations
from django_alkqueue.models import FinishedJob
from django_alkqueue.sql.postgresql.history import DAYS_AHEAD, partition_name, partitions
from django_alkqueue.worker.history_sweeper import HistoryService
from tests.conftest import wait_until
from tests.workers import start_worker, stop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

NOW = datetime(2031, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_day_partitions():
    """Partitions outlive a test's flush: each test starts and ends with the default only."""
    drop_day_partitions()
    yield
    drop_day_partitions()


def drop_day_partitions() -> None:
    with connection.cursor() as cursor:
        for name in partitions(connection):
            if name != "alkqueue_finishedjob_default":
                cursor.execute(f"DROP TABLE {name}")


def keep_row(job_id: int, finished_at: datetime, keep: timedelta) -> None:
    FinishedJob.objects.create(
        job_id=job_id, queue="kept", payload={}, attempts=1, max_attempts=3, backoff_base=5,
        lease=30, enqueued_at=finished_at, finished_at=finished_at, outcome="succeeded",
        delete_after=finished_at + keep,
    )  # fmt: skip


def partition_of(job_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM alkqueue_finishedjob "
                       "WHERE job_id = %s", [job_id])  # fmt: skip
        return str(cursor.fetchone()[0])


def test_the_table_is_partitioned_by_range_of_finished_at_with_both_in_its_primary_key():
    with connection.cursor() as cursor:
        cursor.execute("SELECT partstrat, pg_get_partkeydef('alkqueue_finishedjob'::regclass) "
                       "FROM pg_partitioned_table "
                       "WHERE partrelid = 'alkqueue_finishedjob'::regclass")  # fmt: skip
        assert cursor.fetchone() == ("r", "RANGE (finished_at)")
        cursor.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'p' "
                       "AND conrelid = 'alkqueue_finishedjob'::regclass")  # fmt: skip
        assert cursor.fetchone()[0] == "PRIMARY KEY (job_id, finished_at)"


def test_prepare_creates_today_and_the_days_ahead_once():
    created = operations.prepare_history("default", NOW)

    days = [NOW.date() + timedelta(days=n) for n in range(DAYS_AHEAD + 1)]
    assert created == DAYS_AHEAD + 1
    assert {partition_name(day) for day in days} <= set(partitions(connection))
    assert operations.prepare_history("default", NOW) == 0


def test_a_row_of_a_day_without_partition_goes_to_the_default_partition():
    keep_row(1, NOW, timedelta(days=1))

    assert partition_of(1) == "alkqueue_finishedjob_default"


def test_creating_a_days_partition_moves_its_rows_out_of_the_default_one():
    keep_row(1, NOW, timedelta(days=1))
    keep_row(2, NOW + timedelta(days=30), timedelta(days=1))

    operations.prepare_history("default", NOW)

    assert partition_of(1) == partition_name(NOW.date())
    assert partition_of(2) == "alkqueue_finishedjob_default"


def test_the_sweep_drops_a_past_days_partition_whose_rows_are_all_past_their_keep():
    operations.prepare_history("default", NOW)
    keep_row(1, NOW, timedelta(hours=1))
    keep_row(2, NOW + timedelta(hours=5), timedelta(hours=2))

    HistoryService("default").run_once(NOW + timedelta(days=1, hours=1))

    assert partition_name(NOW.date()) not in partitions(connection)
    assert not FinishedJob.objects.filter(job_id__in=[1, 2]).exists()


def test_a_past_partition_with_rows_still_kept_stays_and_loses_only_its_expired_rows():
    operations.prepare_history("default", NOW)
    keep_row(1, NOW, timedelta(hours=1))
    keep_row(2, NOW, timedelta(days=30))

    HistoryService("default").run_once(NOW + timedelta(days=2))

    assert partition_name(NOW.date()) in partitions(connection)
    assert list(FinishedJob.objects.values_list("job_id", flat=True)) == [2]


def test_the_sweep_deletes_expired_rows_of_the_default_partition_in_batches():
    for job_id in range(1, 8):
        keep_row(job_id, NOW + timedelta(days=60), timedelta(hours=1))
    keep_row(8, NOW + timedelta(days=60), timedelta(days=5))

    deleted = HistoryService("default", batch=3).run_once(NOW + timedelta(days=61)).deleted

    assert deleted == 7
    assert list(FinishedJob.objects.values_list("job_id", flat=True)) == [8]


def test_a_leading_worker_makes_the_days_ahead_and_drops_a_past_days_partition():
    past = datetime.now(UTC) - timedelta(days=3)
    operations.prepare_history("default", past)  # that day's partition, and the next ones
    keep_row(1, past, timedelta(hours=1))
    today = partition_name(datetime.now(UTC).date())
    ahead = partition_name(datetime.now(UTC).date() + timedelta(days=DAYS_AHEAD))

    worker = start_worker("--queue", "shop-noop")
    try:
        wait_until(lambda: partition_name(past.date()) not in partitions(connection),
                   timeout=60, what="the past day's partition dropped")  # fmt: skip
    finally:
        output = stop(worker)
    assert {today, ahead} <= set(partitions(connection)), output
    assert not FinishedJob.objects.exists()


def test_two_loops_that_notice_a_missing_partition_make_and_log_it_once(caplog):
    """A leader hand-over: the old leader's sweep still holds its transaction open while the
    new one's notices the same days missing. The second waits, looks again, makes nothing,
    logs nothing and does not fail."""
    caplog.set_level(logging.INFO, logger="django_alkqueue")
    first_made, release = threading.Event(), threading.Event()
    second: list[object] = []

    def first_loop() -> None:
        try:
            with transaction.atomic():
                operations.prepare_history("default", NOW)
                first_made.set()
                release.wait(30)
        finally:
            connections.close_all()

    def second_loop() -> None:
        try:
            second.append(operations.prepare_history("default", NOW))
        except Exception as exc:  # the assertion below names it
            second.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=first_loop), threading.Thread(target=second_loop)]
    threads[0].start()
    assert first_made.wait(30)
    threads[1].start()
    wait_until(waiting_for_a_lock, timeout=30, what="the second loop waiting for the first")
    release.set()
    for thread in threads:
        thread.join(30)

    assert second == [0]
    made = [
        r.getMessage() for r in caplog.records if "created the history partition" in r.getMessage()
    ]
    assert sorted(made) == sorted(
        f"created the history partition {partition_name(NOW.date() + timedelta(days=n))}"
        for n in range(DAYS_AHEAD + 1)
    )


def waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND wait_event_type = 'Lock'")  # fmt: skip
        return int(cursor.fetchone()[0]) > 0
