"""Scenarios 12 and 13, handlers that attack their worker (issue 48): two workers, one with a thread
pool and one with a process pool, drain a queue where one job in five leaves a transaction
open on its first attempt (an atomic block entered and never exited, one nested, autocommit
turned off); and a queue of async handlers where one job in four raises SystemExit out of its
coroutine on its first attempt.

Each such attempt fails (TransactionLeftOpen, or SystemExit as a sync handler's) and its retry
completes; nothing is lost, no attempt runs twice, and what the leaky attempts wrote inside
their open transaction is rolled back (the chaos handler writes a second ExecutionLog row of
the same attempt there, which the checker would read as a second hand-out). The other jobs
on the same threads are acked, and every worker stops cleanly."""

from __future__ import annotations

import pytest

from django_alkqueue import queue
from django_alkqueue.models import DeadLetter
from testproject.chaos.models import ExecutionLog

from .harness import Fleet, serving, wait_for
from .invariants import check
from .record import Stopwatch, record
from .scale import pick

pytestmark = [pytest.mark.row_locks, pytest.mark.django_db(transaction=True)]

HOSTILE, ASYNC = "chaos-hostile", "chaos-async"  # lease 5 s, 3 attempts, no backoff
JOBS = pick(short=60, long=2_000)
WAYS = ["atomic", "nested", "autocommit"]


def attempts_of(job_id: int) -> list[tuple[int, str]]:
    runs = ExecutionLog.objects.filter(job_id=job_id).order_by("id")
    return list(runs.values_list("attempt", "outcome"))


def drain(fleet: Fleet, ids: list[int], *args: str) -> dict[str, int | None]:
    fleet.start(*args, worker_id="hostile-threads")
    fleet.start(*args, "--pool", "process", worker_id="hostile-processes")
    wait_for(lambda: not queue_left(ids), timeout=pick(90, 600), what=f"drain of {len(ids)} jobs")
    return fleet.stop_all()


def queue_left(ids: list[int]) -> bool:
    from django_alkqueue.models import QueueMessage

    return QueueMessage.objects.filter(pk__in=ids).exists()


def test_handlers_that_leave_transactions_open_lose_nothing_and_run_nothing_twice(fleet: Fleet):
    payloads = [
        {"ms": 5, "leave_open": {"1": WAYS[i // 5 % 3]}} if i % 5 == 0 else {"ms": 5}
        for i in range(JOBS)
    ]
    ids = [job.id for job in queue(HOSTILE).enqueue_many(payloads)]
    leaky = ids[::5]
    clock = Stopwatch()

    codes = drain(fleet, ids, *serving(HOSTILE, threads=2))

    report = check(ids, expect=dict.fromkeys(ids, "acked"))
    record(12, "Hostile handlers: transactions left open",
           f"{JOBS} jobs, one in five leaving a transaction open on its first attempt, "
           "drained by a thread-pool worker and a process-pool worker", report,
           clock.seconds(), {"leaky": len(leaky)})  # fmt: skip
    assert report.ok, report.summary() + fleet.outputs()
    for job_id in leaky:  # the open attempt failed, and its row written inside rolled back
        assert attempts_of(job_id) == [(1, "failed"), (2, "completed")], fleet.outputs()
    assert not DeadLetter.objects.filter(job_id__in=ids).exists()
    assert set(codes.values()) == {0}, fleet.outputs()


def test_async_handlers_that_raise_system_exit_lose_nothing_and_run_nothing_twice(fleet: Fleet):
    payloads = [{"ms": 5, "system_exit_on": [1]} if i % 4 == 0 else {"ms": 5} for i in range(JOBS)]
    ids = [job.id for job in queue(ASYNC).enqueue_many(payloads)]
    exiting = ids[::4]
    clock = Stopwatch()

    codes = drain(fleet, ids, *serving(ASYNC, threads=2))

    report = check(ids, expect=dict.fromkeys(ids, "acked"))
    record(13, "Hostile handlers: SystemExit out of async handlers",
           f"{JOBS} async jobs, one in four raising SystemExit on its first attempt, drained "
           "by a thread-pool worker and a process-pool worker", report, clock.seconds(),
           {"exiting": len(exiting)})  # fmt: skip
    assert report.ok, report.summary() + fleet.outputs()
    for job_id in exiting:
        assert attempts_of(job_id) == [(1, "failed"), (2, "completed")], fleet.outputs()
    assert not DeadLetter.objects.filter(job_id__in=ids).exists()
    assert set(codes.values()) == {0}, fleet.outputs()
