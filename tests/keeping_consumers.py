"""Consumers that keep history, for tests/test_history.py: loaded by worker subprocesses with
ALKQUEUE_EXTRA_CONSUMERS=tests.keeping_consumers, and by the in-process tests on import.

"keeping" fails its first `fail_first` attempts, then returns `value`, or with
{"output": "big"} a string over MAX_OUTPUT_BYTES, with {"output": "object"} a value that
is not JSON."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django_alkqueue import Job, RetryPolicy, consumer
from testproject.shop.models import HandlerRun

NO_WAIT = RetryPolicy(backoff="constant", base=0)


@consumer("keeping", keep=timedelta(days=2), max_attempts=3, retry=NO_WAIT)
def keep_and_return(payload: dict[str, Any], job: Job) -> Any:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts)
    if job.attempts <= payload.get("fail_first", 0):
        raise ConnectionError(f"attempt {job.attempts} fails")
    if payload.get("output") == "big":
        return "x" * 40_000
    if payload.get("output") == "object":
        return object()
    return payload.get("value")


@consumer("keeping-atomic", keep=3600, atomic=True)
def keep_atomically(payload: dict[str, Any], job: Job) -> Any:
    return {"done": job.id}


@consumer("keeping-batch", keep=3600, batch=10)
def keep_a_batch(jobs: list[Job]) -> None:
    return None


@consumer("not-keeping")
def keep_nothing(payload: dict[str, Any], job: Job) -> Any:
    return {"ignored": True}
