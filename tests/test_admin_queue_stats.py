"""The QueueStat writers behind the admin charts: the leader's per-minute readings and
pruning, and every worker's finished / failed deltas. One tick at a time via run_once()."""

from __future__ import annotations

import re
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import DatabaseError
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import queue, timings
from django_alkqueue.models import QueueStat
from django_alkqueue.reports.queue_stats import minute_of
from django_alkqueue.reports.worker_report import TIMED_PER_BATCH, sampled_times
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.worker.queue_stats import QueueStatCountService, QueueStatDeltaService
from testproject.shop.models import HandlerRun
from tests.admin_helpers import queue_url
from tests.workers import run_worker

pytestmark = pytest.mark.django_db


def stat(name: str, minute) -> QueueStat:
    return QueueStat.objects.get(queue=name, minute=minute)


def fail_one(q, error="boom"):
    q.enqueue({}, priority=100)
    q.claim_one("w").fail(error)


def test_the_writer_records_each_queues_state_counts_for_the_minute(make_queue, clock):
    emails = make_queue("shop-emails")
    emails.enqueue_many([1, 2, 3])
    emails.enqueue(4, delay=600)
    emails.claim("w", 1)
    fail_one(make_queue("shop-webhooks"))
    assert QueueStatCountService("default").run_once(clock()) == 2
    row = stat("shop-emails", minute_of(clock()))
    assert (row.pending, row.scheduled, row.claimed, row.dead) == (2, 1, 1, 0)
    dead = stat("shop-webhooks", minute_of(clock()))
    assert (dead.dead, dead.dead_lettered) == (1, 1)


def test_a_second_reading_in_the_same_minute_replaces_the_first(make_queue, clock):
    emails = make_queue("shop-emails")
    emails.enqueue(1)
    writer = QueueStatCountService("default")
    writer.run_once(clock())
    emails.enqueue(2)
    clock.advance(20)
    writer.run_once(clock())
    assert QueueStat.objects.filter(queue="shop-emails").count() == 1
    assert stat("shop-emails", minute_of(clock())).pending == 2


def test_the_previous_minutes_dead_letters_are_counted_once_it_is_over(make_queue, clock):
    clock.now = clock.now.replace(second=10)
    webhooks = make_queue("shop-webhooks")
    webhooks.enqueue({})  # the queue exists at the first reading
    writer = QueueStatCountService("default")
    writer.run_once(clock())
    first = minute_of(clock())
    clock.advance(40)  # still the same minute: a death after the last reading
    fail_one(webhooks)
    clock.advance(20)  # the next minute
    writer.run_once(clock())
    assert stat("shop-webhooks", first).dead_lettered == 1
    assert stat("shop-webhooks", minute_of(clock())).dead_lettered == 0


def test_the_writer_prunes_minutes_older_than_the_retention(make_queue, clock):
    make_queue("shop-emails").enqueue(1)
    writer = QueueStatCountService("default")
    writer.run_once(clock())
    old = minute_of(clock())
    with override_settings(ALKQUEUE={"STATS_RETENTION": 3600}):
        clock.advance(3600 + 60)
        writer.run_once(clock())
        assert not QueueStat.objects.filter(minute=old).exists()
        assert QueueStat.objects.filter(minute=minute_of(clock())).exists()


def test_minutes_are_kept_for_seven_days_by_default(make_queue, clock):
    make_queue("shop-emails").enqueue(1)
    writer = QueueStatCountService("default")
    writer.run_once(clock())
    clock.advance(timedelta(days=6, hours=23).total_seconds())
    writer.run_once(clock())
    assert QueueStat.objects.count() == 2


def test_deltas_add_what_the_worker_finished_and_failed_since_the_last_flush(clock):
    stats = WorkerStats()
    deltas = QueueStatDeltaService("default", stats, 5.0)
    for outcome in ("succeeded", "succeeded", "retried", "dead", "lost"):
        stats.record("shop-emails", outcome)
    assert deltas.run_once(clock()) == 1
    row = stat("shop-emails", minute_of(clock()))
    assert (row.finished, row.failed) == (2, 2)
    stats.record("shop-emails", "succeeded")
    deltas.run_once(clock())
    assert deltas.run_once(clock()) == 0
    row.refresh_from_db()
    assert (row.finished, row.failed) == (3, 2)


def test_two_workers_deltas_add_up_in_one_row_beside_the_leaders_counts(make_queue, clock):
    make_queue("shop-emails").enqueue_many([1, 2])
    QueueStatCountService("default").run_once(clock())
    for _ in range(2):
        stats = WorkerStats()
        stats.record("shop-emails", "succeeded")
        QueueStatDeltaService("default", stats, 5.0).run_once(clock())
    row = stat("shop-emails", minute_of(clock()))
    assert (row.pending, row.finished) == (2, 2)


def test_deltas_that_failed_to_write_are_written_by_the_next_flush(clock, monkeypatch):
    stats = WorkerStats()
    deltas = QueueStatDeltaService("default", stats, 5.0)
    stats.record("shop-emails", "succeeded")
    original = deltas._write

    def broken(*args):
        raise DatabaseError("connection lost")

    monkeypatch.setattr(deltas, "_write", broken)
    with pytest.raises(DatabaseError):
        deltas.run_once(clock())
    monkeypatch.setattr(deltas, "_write", original)
    stats.record("shop-emails", "succeeded")
    deltas.run_once(clock())
    assert stat("shop-emails", minute_of(clock())).finished == 2


def test_deltas_go_to_the_minute_they_are_flushed_in(clock):
    stats = WorkerStats()
    deltas = QueueStatDeltaService("default", stats, 5.0)
    stats.record("shop-emails", "succeeded")
    deltas.run_once(clock())
    clock.advance(60)
    stats.record("shop-emails", "retried")
    deltas.run_once(clock())
    rows = list(QueueStat.objects.order_by("minute").values_list("finished", "failed"))
    assert rows == [(1, 0), (0, 1)]


def wait_histogram(row: QueueStat) -> list[int]:
    return [getattr(row, f"wait_{name}") for name in timings.NAMES]


def run_histogram(row: QueueStat) -> tuple[int, ...]:
    return timings.run_bins(row.duration_count, [getattr(row, c) for c in timings.RUN_FIELDS[1:]])


def record_waits(stats: WorkerStats, queue: str, waits: list[float]) -> None:
    """Count jobs of `queue` that waited `waits` (seconds) into its wait histogram."""
    stats.record(queue, "succeeded", 0, [(wait, 0.0, 1) for wait in waits])


def test_deltas_add_the_wait_histogram_since_the_last_flush(clock):
    stats = WorkerStats()
    deltas = QueueStatDeltaService("default", stats, 5.0)
    record_waits(stats, "shop-emails", [0.02, 2.0])
    assert deltas.run_once(clock()) == 1
    record_waits(stats, "shop-emails", [0.02])
    deltas.run_once(clock())
    wait = wait_histogram(stat("shop-emails", minute_of(clock())))
    assert wait[timings.bin_of(0.02)] == 2 and wait[timings.bin_of(2.0)] == 1 and sum(wait) == 3


def test_the_run_time_histogram_is_the_handler_durations_of_the_metrics(clock):
    stats = WorkerStats()
    deltas = QueueStatDeltaService("default", stats, 5.0)
    stats.record_duration("shop-emails", 0.2)
    stats.record_duration("shop-emails", 0.3)
    deltas.run_once(clock())
    stats.record_duration("shop-emails", 4000.0)
    deltas.run_once(clock())
    row = stat("shop-emails", minute_of(clock()))
    run = run_histogram(row)
    assert row.duration_count == 3 and row.duration_le_500ms == 2 and row.duration_le_300s == 2
    assert run[timings.RUN_BOUNDS.index(0.5)] == 2 and run[-1] == 1 and sum(run) == 3


def test_the_queue_page_reads_handlers_of_one_second_as_one_second(root):
    queue("shop-emails").enqueue({})  # the page of a queue something names
    stats = WorkerStats()
    for extra in range(20):
        stats.record_duration("shop-emails", 1.0 + extra / 1000)
    QueueStatDeltaService("default", stats, 5.0).run_once(timezone.now())

    html = root.get(f"{queue_url('shop-emails')}?window=1h").content.decode()

    p50, p95 = re.findall(r"p50 ([\d.]+) s, p95 ([\d.]+) s \(20 jobs\)", html)[0]
    assert 0.75 <= float(p50) <= 1.25 and 0.75 <= float(p95) <= 1.25


def test_two_workers_histograms_add_up_in_one_row(clock):
    for _ in range(2):
        stats = WorkerStats()
        record_waits(stats, "shop-emails", [0.2])
        stats.record_duration("shop-emails", 0.2)
        QueueStatDeltaService("default", stats, 5.0).run_once(clock())
    row = stat("shop-emails", minute_of(clock()))
    assert row.wait_300ms == 2 and row.duration_le_500ms == 2


@pytest.mark.django_db(transaction=True)
def test_a_worker_writes_the_minutes_of_the_queues_it_serves():
    jobs = queue("shop-emails").enqueue_many([{"i": i} for i in range(5)])
    queue("shop-emails").enqueue({"permanent": True})  # dies at once: outside retry_on
    run_worker("--queue", "shop-emails", "--burst", "--concurrency", "2")
    assert HandlerRun.objects.count() == len(jobs) + 1
    rows = QueueStat.objects.filter(queue="shop-emails")
    assert sum(r.finished for r in rows) == 5
    assert sum(r.failed for r in rows) == 1
    # Every attempt's wait, and every handler call's duration (the run time the chart and
    # /metrics/ both read), in the histograms.
    assert sum(sum(wait_histogram(r)) for r in rows) == 6
    assert sum(sum(run_histogram(r)) for r in rows) == 6
    # (The leader's state readings are timed: a burst this short may end before the first;
    # the writer's own tests cover them.)


def test_a_large_ack_batch_times_a_sample_whose_weights_add_up_to_the_batch():
    now = timezone.now()
    jobs = [(SimpleNamespace(queue="q", run_at=now), 0.0) for _ in range(100)]
    sample = sampled_times(jobs, 1.0, now.timestamp() + 1.0)
    assert len(sample) <= TIMED_PER_BATCH
    assert sum(weight for *_, weight in sample) == 100
    assert all(wait == 0.0 and run == 1.0 for wait, run, _ in sample)
