"""Issue 48, item 2: a job that takes its worker down twice is dead-lettered ("crashed its
worker"), so a poison job cannot loop through restarts. A worker whose loop dies gives back
the jobs whose handlers were running with their attempt and a crash counted (the `crashes`
column); at the second crash the job goes to the dead letters instead. The process pool
counts a child's own death with the attempt's retry (`operations.crashed` with a CrashRetry;
against real workers in tests/test_process_pool_crashes.py).

The worker subprocesses import this module as an extra consumer module
(ALKQUEUE_EXTRA_CONSUMERS); the test process itself does not register its consumer.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

import pytest

from django_alkqueue import Job, consumer, operations, queue
from django_alkqueue.jobs import CRASHED_ITS_WORKER, MAX_ATTEMPTS_EXCEEDED
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.sql import CrashRetry
from django_alkqueue.worker.exits import EXIT_SOFTWARE
from testproject.shop.models import HandlerRun
from tests.workers import start_worker

POISON = "poison-jobs"
CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": __name__}


def break_the_worker(payload: Any, job: Job) -> None:
    """A handler that breaks a loop of its worker (here its heartbeat service), then runs on."""
    from django_alkqueue.worker import heartbeats

    def broken(*args: Any, **kwargs: Any) -> set[Any]:
        raise RuntimeError("the heartbeat service is broken")

    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts)
    heartbeats.heartbeat_handles = broken  # type: ignore[assignment]
    time.sleep(30)


if __name__ in os.environ.get("ALKQUEUE_EXTRA_CONSUMERS", "").split(","):
    consumer(POISON, lease=1)(break_the_worker)


@pytest.mark.django_db
def test_a_crash_gives_the_claim_back_with_its_attempt_and_a_crash_counted(make_queue, clock):
    q = make_queue("crashing")
    job = q.enqueue({})
    handle = q.claim_one("w1")

    assert operations.crashed(q.using, handle.claim, clock()) == (True, None)

    row = QueueMessage.objects.get(id=job.id)
    assert (row.claim_token, row.attempts, row.crashes) == (None, 1, 1)
    assert q.get_job(job.id).state == "pending"


@pytest.mark.django_db
def test_the_second_crash_dead_letters_the_job(make_queue, clock):
    q = make_queue("crashing")
    job = q.enqueue({})
    operations.crashed(q.using, q.claim_one("w1").claim, clock())
    clock.advance(1)

    valid, dead = operations.crashed(q.using, q.claim_one("w2").claim, clock())

    assert valid and dead is not None and dead.id == job.id
    letter = DeadLetter.objects.get(job_id=job.id)
    assert (letter.reason, letter.last_error, letter.attempts) == (
        CRASHED_ITS_WORKER, CRASHED_ITS_WORKER, 2,
    )  # fmt: skip
    assert not QueueMessage.objects.filter(id=job.id).exists()


@pytest.mark.django_db
def test_a_crash_retry_goes_back_from_its_run_at_with_its_error_and_a_crash_counted(
    make_queue, clock
):
    q = make_queue("crashing")
    job = q.enqueue({})
    run_at = clock() + timedelta(seconds=30)
    retry = CrashRetry(run_at, "WorkerChildDied: child 7 exited with status 3")

    assert operations.crashed(q.using, q.claim_one("w1").claim, clock(), retry) == (True, None)

    row = QueueMessage.objects.get(id=job.id)
    assert (row.claim_token, row.attempts, row.crashes) == (None, 1, 1)
    assert (row.run_at, row.last_error) == (run_at, retry.error)


@pytest.mark.django_db
def test_a_second_crash_retry_dead_letters_the_job_with_its_error(make_queue, clock):
    q = make_queue("crashing")
    job = q.enqueue({})
    retry = CrashRetry(clock(), "WorkerChildDied: child 7 killed by SIGSEGV")
    operations.crashed(q.using, q.claim_one("w1").claim, clock(), retry)
    clock.advance(1)

    valid, dead = operations.crashed(q.using, q.claim_one("w2").claim, clock(), retry)

    assert valid and dead is not None
    letter = DeadLetter.objects.get(job_id=job.id)
    assert (letter.reason, letter.last_error) == (CRASHED_ITS_WORKER, retry.error)


@pytest.mark.django_db
def test_a_first_crash_on_the_last_attempt_dead_letters_it_as_out_of_attempts(make_queue, clock):
    q = make_queue("crashing", max_attempts=1)
    job = q.enqueue({})
    retry = CrashRetry(clock(), "WorkerChildDied: child 7 exited with status 3", True)

    valid, dead = operations.crashed(q.using, q.claim_one("w1").claim, clock(), retry)

    assert valid and dead is not None
    letter = DeadLetter.objects.get(job_id=job.id)
    assert (letter.reason, letter.last_error) == (MAX_ATTEMPTS_EXCEEDED, retry.error)


@pytest.mark.django_db
def test_a_crash_of_a_claim_no_longer_held_changes_nothing(make_queue, clock):
    q = make_queue("crashing")
    q.enqueue({})
    handle = q.claim_one("w1")
    assert handle.ack()

    assert operations.crashed(q.using, handle.claim, clock()) == (False, None)


def _run_until_it_breaks() -> str:
    process = start_worker("--queue", POISON, "--concurrency", "1", "--poll-interval", "0.1",
                           env=CONSUMERS)  # fmt: skip
    output, _ = process.communicate(timeout=60)
    assert process.returncode == EXIT_SOFTWARE, output
    return output


@pytest.mark.django_db(transaction=True)
def test_a_job_that_takes_its_worker_down_twice_is_dead_lettered():
    job = queue(POISON, max_attempts=25).enqueue({})

    first = _run_until_it_breaks()
    row = QueueMessage.objects.get(id=job.id)
    assert (row.claim_token, row.attempts, row.crashes) == (None, 1, 1), first

    second = _run_until_it_breaks()

    letter = DeadLetter.objects.filter(job_id=job.id).first()
    assert letter is not None, second
    assert letter.reason == CRASHED_ITS_WORKER
    assert HandlerRun.objects.filter(job_id=job.id).count() == 2
    assert "crashed their worker before" in second
