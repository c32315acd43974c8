"""Time limits in the thread pool (docs/running-jobs.md): a handler past its consumer's
`timeout` fails its attempt with TimeLimitExceeded through the retry policy while its thread
still runs; past --max-stuck stuck threads the worker exits 75 for a supervisor to restart."""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import InvalidOption, TimeLimitExceeded, consumer, queue
from django_alkqueue.consumers import registry
from django_alkqueue.models import DeadLetter, QueueMessage, Worker
from django_alkqueue.testing import Drained, drain
from django_alkqueue.worker.exits import EXIT_STUCK
from django_alkqueue.worker.inflight import InFlight
from django_alkqueue.worker.pool import ThreadPool
from django_alkqueue.worker.time_limits import TimeLimitService
from testproject.shop.models import HandlerRun
from tests.conftest import RUNNING_CONSUMERS, wait_until
from tests.workers import Watched, start_worker, stop

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("running_consumers"),
]

CONSUMERS = RUNNING_CONSUMERS


def notes(job_id: int) -> list[tuple[int, str]]:
    return list(
        HandlerRun.objects.filter(job_id=job_id).order_by("id").values_list("attempt", "note")
    )


def test_an_attempt_past_its_time_limit_fails_and_is_retried_while_its_thread_still_sleeps():
    job = queue("overrunning").enqueue({"sleep": 4})
    worker = Watched(start_worker("--queue", "overrunning", "--concurrency", "1",
                                  "--shutdown-timeout", "1", env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: any(a == 2 and n.startswith("started") for a, n in notes(job.id)),
                   timeout=30, what=f"the second attempt\n{worker.output}")  # fmt: skip
        # The first attempt's thread is still asleep: its handler has not come back.
        assert not any(a == 1 and n.startswith("woke") for a, n in notes(job.id))
        row = QueueMessage.objects.get(id=job.id)
        assert row.last_error == "TimeLimitExceeded: ran longer than 1 s"
    finally:
        stop(worker.process)


def test_a_handler_that_returns_after_its_time_limit_has_its_outcome_discarded():
    job = queue("overrunning").enqueue({"sleep": 2.5})
    worker = Watched(start_worker("--queue", "overrunning", "--concurrency", "1",
                                  "--shutdown-timeout", "1", env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: any(a == 1 and n.startswith("woke") for a, n in notes(job.id)),
                   timeout=30, what=f"the first attempt's return\n{worker.output}")  # fmt: skip
        # It returned (an ack) after its attempt was failed: the job was not acked.
        wait_until(lambda: "returned after its time limit" in worker.output, timeout=10,
                   what=f"the discarded outcome\n{worker.output}")  # fmt: skip
        assert (1, "woke; cancelled=True") in notes(job.id)
        assert (
            QueueMessage.objects.filter(id=job.id).exists()
            or DeadLetter.objects.filter(job_id=job.id).exists()
        )
    finally:
        stop(worker.process)


def test_each_job_of_a_batch_call_past_its_limit_is_retried_on_its_own():
    jobs = queue("overrunning-batch").enqueue_many([{"n": n} for n in range(3)])
    worker = Watched(start_worker("--queue", "overrunning-batch", "--concurrency", "1",
                                  "--shutdown-timeout", "1", env=CONSUMERS))  # fmt: skip
    try:
        ids = [job.id for job in jobs]
        wait_until(lambda: not QueueMessage.objects.filter(id__in=ids).exists(), timeout=60,
                   what=f"the second attempts acked\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    for job in jobs:
        assert [a for a, n in notes(job.id) if n == "started"] == [1, 2]
    assert not DeadLetter.objects.filter(job_id__in=ids).exists()


def test_a_job_out_of_attempts_past_its_limit_is_dead_lettered_as_max_attempts_exceeded():
    job = queue("overrunning").enqueue({"sleep": 2})
    worker = Watched(start_worker("--queue", "overrunning", "--concurrency", "1",
                                  "--shutdown-timeout", "1", env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: DeadLetter.objects.filter(job_id=job.id).exists(), timeout=60,
                   what=f"the dead letter\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    dead = DeadLetter.objects.get(job_id=job.id)
    assert dead.reason == "max attempts exceeded"
    assert dead.last_error == "TimeLimitExceeded: ran longer than 1 s"
    assert dead.attempts == 3


def test_past_max_stuck_the_worker_releases_its_other_jobs_and_exits_75():
    stuck = queue("stuck").enqueue({"sleep": 600})
    other = queue("overrunning").enqueue({"sleep": 0.1}, delay=3)
    process = start_worker("--queue", "stuck", "--queue", "overrunning", "--max-stuck", "0",
                           "--concurrency", "2", "--shutdown-timeout", "5",
                           env=CONSUMERS)  # fmt: skip
    try:
        output, _ = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == EXIT_STUCK, output
    assert "stuck past their time limit" in output
    # The stuck job's only attempt failed at its limit; the other job ran to its end.
    assert DeadLetter.objects.get(job_id=stuck.id).last_error.startswith("TimeLimitExceeded")
    assert (
        any(n.startswith("woke") for _, n in notes(other.id))
        or QueueMessage.objects.filter(id=other.id, claim_token__isnull=True).exists()
    )


def test_the_supervisor_restarts_a_worker_that_exited_with_stuck_threads():
    queue("stuck").enqueue({"sleep": 600})
    supervisor = Watched(start_worker("--queue", "stuck", "--processes", "2", "--max-stuck", "0",
                                      "--shutdown-timeout", "1", env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: f"exited with {EXIT_STUCK}; restarting" in supervisor.output,
                   timeout=60, what=f"the restart\n{supervisor.output}")  # fmt: skip
        # Three worker processes registered in all: the two first, and the one restarted.
        wait_until(lambda: Worker.objects.count() >= 3 or _restarted(supervisor.output),
                   timeout=30, what=f"the new worker\n{supervisor.output}")  # fmt: skip
        assert supervisor.alive()
    finally:
        stop(supervisor.process)


def _restarted(output: str) -> bool:
    return output.count("serving stuck") >= 3


def test_a_handler_reads_its_deadline_and_the_time_remaining():
    seen = []

    @consumer("limited", timeout=timedelta(seconds=30))
    def handler(payload, job):
        seen.append((job.deadline, job.remaining(), timezone.now()))

    try:
        queue("limited").enqueue({})
        assert drain("limited") == Drained(succeeded=1)
    finally:
        registry.unregister("limited")
    ((deadline, remaining, at),) = seen
    assert 29 < remaining <= 30
    assert abs((deadline - at).total_seconds() - 30) < 1


def test_without_a_timeout_a_job_has_no_deadline_and_all_the_time_in_the_world():
    seen = []

    @consumer("unlimited")
    def handler(payload, job):
        seen.append((job.deadline, job.remaining()))

    try:
        queue("unlimited").enqueue({})
        drain("unlimited")
    finally:
        registry.unregister("unlimited")
    assert seen == [(None, math.inf)]


def test_time_limit_exceeded_names_the_limit():
    assert str(TimeLimitExceeded(30)) == "ran longer than 30 s"


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "30"])
def test_a_bad_timeout_raises_invalid_option(timeout):
    with pytest.raises(InvalidOption):
        consumer("limited", timeout=timeout)


@override_settings(ALKQUEUE={"QUEUES": {"tasks-limited": {"timeout": 12}}})
def test_a_task_queue_takes_its_timeout_from_the_queues_setting():
    from django_alkqueue.task_runner import task_queue_timeout

    assert task_queue_timeout("tasks-limited") == 12.0
    assert task_queue_timeout("tasks-unlimited") is None


def test_a_bad_task_queue_timeout_is_refused_with_its_setting_named():
    from django.core.exceptions import ImproperlyConfigured

    from django_alkqueue.conf import read_settings

    with pytest.raises(ImproperlyConfigured, match="timeout"):
        read_settings({"QUEUES": {"tasks": {"timeout": -5}}})


def test_the_time_limits_settle_an_overdue_job_and_its_lease_is_extended_no_more(q, clock):
    q.enqueue({})
    (handle,) = q.claim("w1")
    inflight = InFlight()
    inflight.add(handle)
    run = inflight.run_of(handle)
    run.start(clock, 1.0, time.monotonic())
    settled = []
    limits = TimeLimitService(inflight, ThreadPool(1, lambda unit: None),
                        lambda h, r: settled.append(h), on_stuck=lambda n: None)  # fmt: skip

    assert limits.run_once(clock() + timedelta(seconds=0.5)) == 0
    assert limits.run_once(clock() + timedelta(seconds=1)) == 1

    assert settled == [handle]
    assert run.cancelled and run.timed_out
    assert inflight.to_heartbeat() == []
    assert limits.run_once(clock() + timedelta(seconds=2)) == 0  # once only


def test_a_stuck_thread_past_max_stuck_recycles_the_worker_once(q, clock):
    q.enqueue({})
    (handle,) = q.claim("w1")
    inflight = InFlight()
    inflight.add(handle)
    started, release = threading.Event(), threading.Event()

    def handler_thread(unit):  # what the executor does: start the run, call the handler
        inflight.run_of(handle).start(clock, 1.0, time.monotonic())
        started.set()
        release.wait(30)

    pool = ThreadPool(1, handler_thread)
    pool.start()
    pool.submit([handle])
    recycles = []
    limits = TimeLimitService(
        inflight, pool, lambda h, r: None, recycles.append, max_stuck=0, grace=0
    )
    try:
        assert started.wait(10)
        assert limits.run_once(clock() + timedelta(seconds=1)) == 1
        limits.run_once(clock() + timedelta(seconds=2))
        assert recycles == [1]
    finally:
        release.set()
        pool.stop()
        pool.join(5)
