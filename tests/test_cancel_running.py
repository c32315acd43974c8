"""Cancelling a running job (docs/running-jobs.md): the row goes as before, the worker running
it raises the job's cancel flag (within a second on PostgreSQL by NOTIFY; at its next lease
heartbeat elsewhere), the handler's Cancelled ends the attempt with no retry and no dead letter,
and a CancelRequest row shows "cancel requested" until the handler has stopped."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from django_alkqueue import Cancelled, queue
from django_alkqueue.consumers import registry
from django_alkqueue.models import CancelRequest, DeadLetter, FinishedJob, QueueMessage
from testproject.shop.models import HandlerRun
from tests.conftest import RUNNING_CONSUMERS, wait_until
from tests.workers import Watched, start_worker, stop

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("running_consumers"),
]

CONSUMERS = RUNNING_CONSUMERS


def noted(job_id: int, note: str) -> bool:
    return HandlerRun.objects.filter(job_id=job_id, note=note).exists()


@pytest.fixture
def running_job():
    """A job of "cancellable" running in a worker subprocess, and that worker."""
    job = queue("cancellable").enqueue({})
    worker = Watched(start_worker("--queue", "cancellable", "--shutdown-timeout", "2",
                                  env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: noted(job.id, "started"), timeout=30,
                   what=f"the handler's start\n{worker.output}")  # fmt: skip
        yield job, worker
    finally:
        stop(worker.process)


def test_a_cancelled_running_job_sees_its_flag_and_its_handler_stops(running_job):
    job, worker = running_job
    # PostgreSQL: within a second (NOTIFY). Elsewhere: the next heartbeat of its 3 s lease.
    limit = 1.0 if connection.vendor == "postgresql" else 1.0 + 3 / 3
    asked = time.monotonic()

    assert queue("cancellable").cancel(job.id) is True

    wait_until(lambda: noted(job.id, "saw cancel"), timeout=30,
               what=f"the handler seeing its cancel\n{worker.output}")  # fmt: skip
    seen_after = time.monotonic() - asked
    assert seen_after < limit * 5, f"{seen_after:.2f} s"  # generous: the machine is loaded


def test_a_handler_stopped_by_cancel_leaves_no_retry_and_no_dead_letter(running_job):
    job, worker = running_job

    queue("cancellable").cancel(job.id)

    wait_until(lambda: noted(job.id, "saw cancel"), timeout=30, what="the cancel")
    wait_until(lambda: not CancelRequest.objects.filter(job_id=job.id).exists(), timeout=30,
               what=f"the cancel request cleared\n{worker.output}")  # fmt: skip
    time.sleep(0.5)  # a retry, if one were made, would have been claimed by now
    assert not QueueMessage.objects.filter(id=job.id).exists()
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert HandlerRun.objects.filter(job_id=job.id, note="started").count() == 1
    assert not noted(job.id, "never cancelled")


def test_a_cancel_request_stays_until_the_handler_has_stopped(q):
    job = q.enqueue({})
    (handle,) = q.claim("w1")

    q.cancel(job.id)

    request = CancelRequest.objects.get(job_id=job.id)
    assert (request.queue, request.worker_id) == (q.name, "w1")
    assert q.get_job(job.id) is None
    assert handle.ack() is False  # the row went as before


def test_cancel_of_a_pending_job_leaves_no_cancel_request(q):
    job = q.enqueue({})

    assert q.cancel(job.id) is True

    assert not CancelRequest.objects.exists()


def test_a_handler_raising_cancelled_on_its_own_ends_its_job_without_retry(q):
    from django_alkqueue import consumer
    from django_alkqueue.testing import Drained, drain

    @consumer("giving-up")
    def give_up(payload, job):
        raise Cancelled("nothing left to do")

    try:
        job = queue("giving-up").enqueue({})
        drained = drain("giving-up")
    finally:
        registry.unregister("giving-up")
    assert drained == Drained(cancelled=1)
    assert queue("giving-up").get_job(job.id) is None


def test_the_sweep_clears_the_cancel_requests_of_workers_that_are_gone(q, clock):
    from datetime import timedelta

    from django_alkqueue import operations

    job = q.enqueue({})
    q.claim("gone-worker")
    q.cancel(job.id)

    later = clock() + timedelta(seconds=120)
    assert operations.sweep_cancel_requests(q.using, later, stale_after=30) == 1
    assert not CancelRequest.objects.exists()


def test_a_heartbeat_that_finds_the_row_gone_raises_the_cancel_flag(q, clock):
    from django_alkqueue.running import CLAIM_LOST
    from django_alkqueue.worker.heartbeats import HeartbeatService
    from django_alkqueue.worker.inflight import InFlight

    job = q.enqueue({})
    (handle,) = q.claim("w1")
    inflight = InFlight()
    inflight.add(handle)
    q.cancel(job.id)

    HeartbeatService(inflight, q.using).run_once(clock())

    run = inflight.run_of(handle)
    assert run.cancelled and run.cancel_reason == CLAIM_LOST


@pytest.mark.skipif(connection.vendor != "postgresql", reason="NOTIFY is PostgreSQL's")
def test_on_postgresql_the_worker_hears_a_cancel_by_notify_long_before_its_next_heartbeat():
    job = queue("cancellable-long-lease").enqueue({})
    worker = Watched(start_worker("--queue", "cancellable-long-lease", "--shutdown-timeout", "2",
                                  env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: noted(job.id, "started"), timeout=30, what=f"the start\n{worker.output}")
        time.sleep(1.0)  # the new claim's lease was extended: the next heartbeat is 20 s off
        asked = time.monotonic()

        queue("cancellable-long-lease").cancel(job.id)

        wait_until(lambda: noted(job.id, "saw cancel"), timeout=15,
                   what=f"the handler seeing its cancel\n{worker.output}")  # fmt: skip
        assert time.monotonic() - asked < 10  # 1 s in practice; the heartbeat would take 20
    finally:
        stop(worker.process)


def test_the_admin_cancel_of_a_claimed_job_leaves_a_cancel_request(q, root):
    from tests.admin_helpers import JOBS

    job = q.enqueue({})
    q.claim("w1")

    root.post(JOBS, {"action": "cancel", "_selected_action": [job.id], "confirm": "yes"})

    assert q.get_job(job.id) is None
    assert CancelRequest.objects.get(job_id=job.id).worker_id == "w1"


def test_a_job_cancelled_while_running_is_kept_as_cancelled_on_a_queue_with_keep():
    job = queue("cancellable-kept").enqueue({})
    worker = Watched(start_worker("--queue", "cancellable-kept", "--shutdown-timeout", "2",
                                  env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: noted(job.id, "started"), timeout=30,
                   what=f"the handler's start\n{worker.output}")  # fmt: skip
        queue("cancellable-kept").cancel(job.id)
        wait_until(lambda: FinishedJob.objects.filter(job_id=job.id).exists(), timeout=30,
                   what=f"the history row\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    kept = queue("cancellable-kept").get_job(job.id)
    assert kept is not None and kept.state == "cancelled"
    assert kept.duration is not None and kept.duration > 0


def test_a_handler_cancelling_its_own_job_is_kept_as_cancelled_not_succeeded():
    job = queue("self-cancelling-kept").enqueue({})
    worker = Watched(start_worker("--queue", "self-cancelling-kept", "--shutdown-timeout", "2",
                                  env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: FinishedJob.objects.filter(job_id=job.id).exists(), timeout=30,
                   what=f"the history row\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    assert not QueueMessage.objects.filter(id=job.id).exists()
    assert FinishedJob.objects.get(job_id=job.id).outcome == "cancelled"
