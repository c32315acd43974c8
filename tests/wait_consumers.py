"""Consumers that sleep and wait for signals (docs/durable-steps.md), for
tests/test_durable_waits.py: loaded by worker subprocesses with
ALKQUEUE_EXTRA_CONSUMERS=tests.wait_consumers, and by the in-process tests on import. Each
handler leaves HandlerRun rows (its own record) saying what it got."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django_alkqueue import InvalidOption, Job, RetryPolicy, WaitTimedOut, consumer
from testproject.shop.models import HandlerRun

NO_WAIT = RetryPolicy(backoff="constant", base=0)
#: The queues of this module, which the tests unregister after each test.
QUEUES = ("sleepers", "quick", "approvals", "timed-approvals", "atomic-waits", "batch-waits",
          "async-waits", "one-at-a-time")  # fmt: skip


def record(job: Job, note: str) -> None:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts,
                              worker=job.claimed_by or "", note=note)  # fmt: skip


@consumer("sleepers", max_attempts=1)
def sleepers(payload: dict[str, Any], job: Any) -> None:
    """Sleeps `seconds`, then says so: "woke" once, whatever ran before it twice."""
    record(job, "started")
    job.sleep("nap", timedelta(seconds=payload["seconds"]))
    record(job, "woke")


@consumer("quick", max_attempts=1)
def quick(payload: dict[str, Any], job: Any) -> None:
    time.sleep(0.05)
    record(job, "ran")


@consumer("one-at-a-time", max_attempts=1, concurrency=1)
def one_at_a_time(payload: dict[str, Any], job: Any) -> None:
    """A queue of one slot: a sleeper of it frees the slot while it sleeps."""
    if payload.get("sleep"):
        job.sleep("nap", payload["sleep"])
        record(job, "woke")
    else:
        record(job, "ran")


@consumer("approvals", max_attempts=1)
def approvals(payload: dict[str, Any], job: Any) -> None:
    record(job, "asked")
    answer = job.wait_for("approved")
    record(job, f"approved by {answer['by']}")


@consumer("timed-approvals", max_attempts=3, retry=NO_WAIT)
def timed_approvals(payload: dict[str, Any], job: Any) -> None:
    """Waits a second for "approved"; on its first timeout it fails after recording it, so
    that the retry shows the same answer."""
    try:
        answer = job.wait_for("approved", timeout=1)
    except WaitTimedOut as exc:
        record(job, f"timed out: {exc}")
        if HandlerRun.objects.filter(job_id=job.id, note__startswith="timed out").count() == 1:
            raise RuntimeError("failing once after the timeout") from None
        return
    record(job, f"approved by {answer['by']}")


def _try(job: Any, call: str, fn: Any) -> None:
    try:
        fn()
    except InvalidOption as exc:
        record(job, f"{call} refused: {exc}")


@consumer("atomic-waits", atomic=True, max_attempts=1)
def atomic_waits(payload: dict[str, Any], job: Any) -> None:
    _try(job, "sleep", lambda: job.sleep("nap", 60))
    _try(job, "wait_for", lambda: job.wait_for("approved"))


@consumer("batch-waits", batch=5, max_attempts=1)
def batch_waits(jobs: list[Any]) -> None:
    for job in jobs:
        _try(job, "sleep", lambda job=job: job.sleep("nap", 60))
        _try(job, "wait_for", lambda job=job: job.wait_for("approved"))


@consumer("async-waits", max_attempts=1)
async def async_waits(payload: dict[str, Any], job: Any) -> None:
    await job.asleep("nap", 0.2)
    answer = await job.await_for("go")
    await HandlerRun.objects.acreate(queue=job.queue, job_id=job.id, attempt=job.attempts,
                                     note=f"got {answer}")  # fmt: skip
