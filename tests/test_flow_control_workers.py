"""Flow control under real workers (issue 34, rules 4, 5 and 6): every limit holds across
worker processes, because the claim enforces it in the database.

`make test` runs these sized down; FLOW_CONTROL_FULL=1 (set by `make chaos`) runs the
issue's sizes: 4 processes x 8 threads over 20,000 jobs and 200 keys (2 processes on
SQLite), and 50,000 jobs of one flooded key."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
from django.db import connection

from django_alkqueue import limits as flow
from django_alkqueue import operations, queue
from django_alkqueue.models import Consumer, QueueMessage
from tests.conftest import wait_until
from tests.flow_consumers import FLOW_RUNS, QUEUE
from tests.workers import Watched, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

FULL = bool(os.environ.get("FLOW_CONTROL_FULL"))
SQLITE = connection.vendor == "sqlite"


@pytest.fixture(autouse=True)
def runs_table() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {FLOW_RUNS} (job_id BIGINT, attempt INTEGER, ckey VARCHAR(255), "
            "claimed_at DOUBLE PRECISION, finished_at DOUBLE PRECISION)"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {FLOW_RUNS}")


def start_workers(
    count: int, threads: int, limits: dict[str, object], env: dict[str, str] | None = None
) -> list[Watched]:
    env = {
        "ALKQUEUE_EXTRA_CONSUMERS": "tests.flow_consumers",
        "FLOW_TEST_LIMITS": json.dumps(limits),
        **(env or {}),
    }
    return [
        Watched(start_worker("--queue", QUEUE, "--concurrency", str(threads),
                             "--poll-interval", "0.2", env=env))
        for _ in range(count)
    ]  # fmt: skip


def stop_all(workers: list[Watched]) -> None:
    for worker in workers:
        stop(worker.process)


def runs() -> list[tuple[int, int, str | None, float, float]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, attempt, ckey, claimed_at, finished_at FROM {FLOW_RUNS}")
        return [tuple(row) for row in cursor.fetchall()]


def count_runs() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {FLOW_RUNS}")
        return int(cursor.fetchone()[0])


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of [start, end] intervals that overlap at one instant."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda event: (event[0], event[1]))  # fmt: skip
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def test_caps_hold_across_worker_processes_and_no_job_is_lost_or_run_twice() -> None:
    processes, threads = (2 if SQLITE else 4, 8) if FULL else (2, 4)
    jobs, keys = (20_000, 200) if FULL else (600, 20)
    caps = (
        {"concurrency": 10, "key_concurrency": 2}
        if FULL
        else {"concurrency": 4, "key_concurrency": 1}
    )
    q = queue(QUEUE)
    enqueued = q.enqueue_many(range(jobs), concurrency_key=lambda i: f"k{i % keys}")
    workers = start_workers(processes, threads, caps)
    try:
        wait_until(lambda: count_runs() >= jobs and not QueueMessage.objects.exists(),
                   timeout=1800 if FULL else 180, every=0.2, what="every job ran")  # fmt: skip
    finally:
        stop_all(workers)
    done = runs()
    assert sorted(job_id for job_id, *_ in done) == sorted(job.id for job in enqueued)
    assert len({(job_id, attempt) for job_id, attempt, *_ in done}) == len(done)
    assert most_at_once([(start, end) for *_, start, end in done]) <= caps["concurrency"]
    by_key: dict[str, list[tuple[float, float]]] = {}
    for _, _, key, start, end in done:
        by_key.setdefault(key, []).append((start, end))
    assert max(most_at_once(spans) for spans in by_key.values()) <= caps["key_concurrency"]


def test_other_keys_start_before_the_flooded_keys_hundredth_job() -> None:
    flooded = 50_000 if FULL else 2_000
    q = queue(QUEUE)
    q.enqueue_many(range(flooded), concurrency_key="flood")
    others = q.enqueue_many(range(10), concurrency_key=lambda i: f"other{i}")
    workers = start_workers(2, 4, {"key_concurrency": 1})
    try:
        wait_until(lambda: count_runs() >= 110, timeout=120, every=0.1, what="110 jobs ran")
    finally:
        stop_all(workers)
    started = sorted(runs(), key=lambda run: run[3])
    flood_starts = [start for _, _, key, start, _ in started if key == "flood"]
    other_ids = {job.id for job in others}
    other_starts = [start for job_id, _, _, start, _ in started if job_id in other_ids]
    assert len(other_starts) == 10
    assert max(other_starts) < flood_starts[99]


def test_an_override_applies_to_running_workers_and_survives_a_restart() -> None:
    q = queue(QUEUE)
    q.enqueue_many(range(2_000))
    slow = {"FLOW_TEST_SLEEP": "0.05"}
    workers = start_workers(1, 8, {"concurrency": 8}, env=slow)
    try:
        wait_until(lambda: count_runs() >= 20, timeout=60, what="20 jobs ran")
        operations.set_limits(QUEUE, concurrency=1)
        set_at = time.time()
        time.sleep(flow.REFRESH_EVERY + 1.5)
    finally:
        stop_all(workers)
    first = runs()
    applied = [(start, end) for *_, start, end in first if start > set_at + flow.REFRESH_EVERY]
    assert applied, "no job started after the change applied"
    assert most_at_once(applied) == 1
    workers = start_workers(1, 8, {"concurrency": 8}, env=slow)  # the code still says 8
    try:
        wait_until(lambda: count_runs() >= len(first) + 20, timeout=60, what="20 more jobs")
    finally:
        stop_all(workers)
    restarted_at = max(end for *_, end in first)
    after = [(start, end) for *_, start, end in runs() if start > restarted_at]
    assert most_at_once(after) == 1
    assert Consumer.objects.get(queue=QUEUE).limit_overrides == {"concurrency": 1}


def test_a_rate_holds_in_every_window_and_is_nearly_reached_while_jobs_wait() -> None:
    count, period = (20, 1.0)
    q = queue(QUEUE)
    q.enqueue_many(range(1_000))
    workers = start_workers(2, 4, {"rate": [count, period]})
    try:
        wait_until(lambda: count_runs() >= 12 * count, timeout=60, every=0.1, what="12 periods")
    finally:
        stop_all(workers)
    starts = sorted(start for *_, start, _ in runs())
    most_in_a_window = max(
        sum(1 for other in starts[i:] if other < start + period) for i, start in enumerate(starts)
    )
    assert most_in_a_window <= count
    ten_periods = [start for start in starts if start < starts[0] + 10 * period]
    assert len(ten_periods) >= 0.9 * 10 * count
