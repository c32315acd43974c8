"""A graceful shutdown never starts a job it gives back: jobs prefetched with --batch and not
yet started are taken out of the handler threads' queue and released, and a handler thread
never begins a job the shutdown has let go."""

from __future__ import annotations

import signal
import threading

import pytest

from django_alkqueue import RetryPolicy, queue
from django_alkqueue.consumers import ConsumerSpec
from django_alkqueue.models import QueueMessage
from django_alkqueue.queues import JobHandle, Queue
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.worker.acker import AckService
from django_alkqueue.worker.executor import Executor
from django_alkqueue.worker.inflight import InFlight
from django_alkqueue.worker.pool import ThreadPool
from testproject.shop.models import HandlerRun
from tests.conftest import wait_until
from tests.test_worker_command import has_run, runs_of, workers  # noqa: F401  (the fixture)


def test_stopping_the_pool_hands_back_the_jobs_no_thread_started(q: Queue, db):
    q.enqueue_many(range(3))
    first, second, third = q.claim("w", 3)
    started = threading.Event()
    release = threading.Event()

    def run(unit: list[JobHandle]) -> None:
        started.set()
        release.wait(10)

    pool = ThreadPool(1, run)
    pool.start()
    pool.submit([first])
    started.wait(10)
    pool.submit([second, third])

    assert pool.stop() == [second, third]
    release.set()
    pool.join(5)


def test_a_handler_thread_never_begins_a_job_that_shutdown_let_go(q: Queue, db):
    ran: list[int] = []
    spec = ConsumerSpec(
        queue=q.name, handler=lambda payload, job: ran.append(job.id), path="tests.handler",
        lease=None, max_attempts=None, retry=RetryPolicy(), atomic=False,
    )  # fmt: skip
    inflight, stats = InFlight(), WorkerStats()
    executor = Executor({q.name: spec}, AckService("default", inflight, stats, 0), inflight, stats,
                        "default")  # fmt: skip
    q.enqueue(1)
    handle = q.claim_one("w")
    inflight.add(handle)
    inflight.remove(handle)  # what the shutdown does before it releases the job

    executor.run(handle)

    assert ran == []


@pytest.mark.django_db(transaction=True)
def test_sigterm_releases_prefetched_jobs_without_running_their_handlers(workers):  # noqa: F811
    # One thread, ten jobs claimed at once: the first runs, nine wait in the threads' queue.
    first = queue("shop-reports", priority=10).enqueue({"sleep": 1.6})
    waiting = queue("shop-reports").enqueue_many([{"n": n} for n in range(9)])
    worker = workers(
        "--queue", "shop-reports", "--concurrency", "1", "--batch", "10",
        "--shutdown-timeout", "1",
    )  # fmt: skip
    wait_until(has_run(first), timeout=15)

    assert worker.stop(signal.SIGTERM, timeout=30) == 0, worker.output

    assert "released" in worker.output, worker.output
    assert runs_of(first) == [1]
    never_started = [j.id for j in waiting]
    assert not HandlerRun.objects.filter(job_id__in=never_started).exists(), worker.output
    rows = QueueMessage.objects.filter(pk__in=never_started)
    assert rows.count() == 9
    assert not rows.filter(claim_token__isnull=False).exists()
    assert set(rows.values_list("attempts", flat=True)) == {0}
