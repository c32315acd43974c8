"""Issue 48, item 3: a handler that leaves a transaction open (an atomic block entered and
never exited, autocommit turned off) fails its attempt with TransactionLeftOpen; what it
wrote is rolled back, and the next job on that thread starts on a clean connection: its
writes are committed, and on SQLite the write lock is not held.

The worker subprocesses import this module as an extra consumer module
(ALKQUEUE_EXTRA_CONSUMERS); the test process itself does not register its consumers.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from django.db import connection, connections, transaction

from django_alkqueue import Job, TransactionLeftOpen, consumer, queue
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.worker.connections import ThreadConnections
from testproject.shop.models import HandlerRun
from tests.workers import run_worker

CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": __name__}
LEAKY, CLEAN = "leaky-transactions", "after-leaky"


def leave_open(payload: dict[str, Any], job: Job) -> None:
    """Writes a HandlerRun, then leaves the transaction `payload["how"]` says open."""
    how = payload["how"]
    if how == "atomic":
        transaction.atomic().__enter__()
    elif how == "nested":
        with transaction.atomic():
            transaction.atomic().__enter__()
    elif how == "autocommit":
        transaction.set_autocommit(False)
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts, note=how)
    if payload.get("raise"):
        raise ValueError("and then it raised")


def write_run(payload: dict[str, Any], job: Job) -> None:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts, note="clean")


def write_run_atomically(payload: dict[str, Any], job: Job) -> None:
    transaction.atomic().__enter__()  # inside the worker's own transaction
    write_run(payload, job)


if __name__ in os.environ.get("ALKQUEUE_EXTRA_CONSUMERS", "").split(","):
    consumer(LEAKY, max_attempts=1)(leave_open)
    consumer(CLEAN)(write_run)
    consumer("leaky-atomic-consumer", atomic=True, max_attempts=1)(write_run_atomically)

POOLS = pytest.mark.parametrize(
    "pool", [[], ["--pool", "process"]], ids=["threads", "process-pool"]
)
HOWS = [
    {"how": "atomic"},
    {"how": "nested"},
    {"how": "autocommit"},
    {"how": "atomic", "raise": True},
]


@pytest.mark.django_db(transaction=True)
@POOLS
def test_a_handler_that_leaves_a_transaction_open_fails_and_the_next_job_starts_clean(pool):
    leaky = queue(LEAKY, max_attempts=1).enqueue_many(HOWS)
    clean = queue(CLEAN).enqueue_many([{} for _ in range(4)])

    # One thread (one child): every clean job runs on the connection a leaky one left.
    output = run_worker("--queue", LEAKY, "--queue", CLEAN, "--concurrency", "1", "--burst",
                        *pool, timeout=60, env=CONSUMERS)  # fmt: skip

    for job, how in zip(leaky, HOWS, strict=True):
        dead = DeadLetter.objects.filter(job_id=job.id).first()
        assert dead is not None, (how, output)
        assert dead.last_error.startswith("TransactionLeftOpen: the handler left a transaction "
                                          "open: "), (how, dead.last_error)  # fmt: skip
        assert "it was rolled back" in dead.last_error.splitlines()[0]
        if how.get("raise"):
            assert "ValueError: and then it raised" in dead.last_error
    assert not HandlerRun.objects.filter(queue=LEAKY).exists(), output  # rolled back
    notes = HandlerRun.objects.filter(queue=CLEAN).values_list("job_id", flat=True)
    assert sorted(notes) == sorted(job.id for job in clean), output  # committed
    assert not QueueMessage.objects.exists(), output
    # The write lock (SQLite) or a transaction's row locks are not held: this process writes.
    queue(CLEAN).enqueue({})


@pytest.mark.django_db(transaction=True)
@POOLS
def test_an_atomic_consumer_that_leaves_a_block_open_inside_the_workers_rolls_it_all_back(pool):
    job = queue("leaky-atomic-consumer", max_attempts=1).enqueue({})
    after = queue(CLEAN).enqueue({})

    output = run_worker("--queue", "leaky-atomic-consumer", "--queue", CLEAN, "--concurrency",
                        "1", "--burst", *pool, timeout=60, env=CONSUMERS)  # fmt: skip

    dead = DeadLetter.objects.get(job_id=job.id)
    assert dead.last_error.startswith("TransactionLeftOpen: "), dead.last_error
    assert not HandlerRun.objects.filter(job_id=job.id).exists(), output
    assert HandlerRun.objects.filter(job_id=after.id).exists(), output


@pytest.mark.django_db(transaction=True)
def test_restore_puts_a_connection_back_as_it_was_and_says_what_was_left_open():
    threads = ThreadConnections()
    before = threads.states()
    transaction.atomic().__enter__()
    transaction.atomic().__enter__()
    HandlerRun.objects.create(queue="q", job_id=1, attempt=1)

    with pytest.raises(TransactionLeftOpen, match=r"2 atomic block\(s\) entered and not exited"):
        threads.restore(before)

    assert not connection.in_atomic_block and connection.get_autocommit()
    assert not HandlerRun.objects.exists()
    threads.restore(before)  # nothing left open now: no error


@pytest.mark.django_db(transaction=True)
def test_a_connection_whose_session_died_in_the_open_transaction_is_restored_all_the_same():
    if connection.vendor != "postgresql":
        pytest.skip("ends the session from another with pg_terminate_backend")
    threads = ThreadConnections()
    before = threads.states()
    transaction.atomic().__enter__()
    HandlerRun.objects.create(queue="q", job_id=1, attempt=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()

    def terminate() -> None:
        with connections["default"].cursor() as cursor:  # this thread's own connection
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        connections.close_all()

    killer = threading.Thread(target=terminate)
    killer.start()
    killer.join()

    with pytest.raises(TransactionLeftOpen):
        threads.restore(before)

    assert threads.states() == before
    assert not HandlerRun.objects.exists()  # the next job's queries work, and see no row
