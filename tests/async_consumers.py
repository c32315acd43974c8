"""`async def` handlers for tests/test_async_handlers.py: loaded by worker subprocesses with
ALKQUEUE_EXTRA_CONSUMERS=tests.async_consumers, and by the in-process tests on import.

Each run records a HandlerRun (through the async ORM) whose note says how many runs of this
process were in flight when it started, so a test can read the concurrency off the table.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from django_alkqueue import Job, RetryPolicy, consumer
from testproject.shop.models import HandlerRun

_lock = threading.Lock()
_running = 0


@consumer("async-jobs", max_attempts=3, retry=RetryPolicy(backoff="constant", base=0))
async def run_async(payload: dict[str, Any], job: Job) -> None:
    global _running
    with _lock:
        _running += 1
        running = _running
    try:
        await HandlerRun.objects.acreate(
            queue=job.queue, job_id=job.id, attempt=job.attempts, note=f"running={running}"
        )
        await asyncio.sleep(float(payload.get("sleep", 0)))
        if job.attempts <= int(payload.get("fail_times", 0)):
            raise ConnectionError(f"temporary failure on attempt {job.attempts}")
    finally:
        with _lock:
            _running -= 1


@consumer("async-batch", batch=10)
async def run_async_batch(jobs: list[Job]) -> None:
    for job in jobs:
        await HandlerRun.objects.acreate(queue=job.queue, job_id=job.id, attempt=job.attempts)


@consumer("async-overrunning", timeout=1, max_attempts=1)
async def overrun_async(payload: dict[str, Any], job: Job) -> None:
    """Sleeps `sleep` seconds whatever its time limit."""
    await HandlerRun.objects.acreate(queue=job.queue, job_id=job.id, attempt=job.attempts,
                                     note="started")  # fmt: skip
    await asyncio.sleep(float(payload["sleep"]))
    await HandlerRun.objects.acreate(queue=job.queue, job_id=job.id, attempt=job.attempts,
                                     note="woke")  # fmt: skip


@consumer("async-hostile", max_attempts=1)
async def hostile_async(payload: dict[str, Any], job: Job) -> str:
    """Does to the worker's event loop what `payload["do"]` says (issue 48, item 1)."""
    await HandlerRun.objects.acreate(queue=job.queue, job_id=job.id, attempt=job.attempts,
                                     note=payload["do"])  # fmt: skip
    if payload["do"] == "exit":
        raise SystemExit(3)
    if payload["do"] == "interrupt":
        raise KeyboardInterrupt
    if payload["do"] == "stop":
        asyncio.get_running_loop().stop()
        await asyncio.sleep(0.05)  # on a loop started again
    if payload["do"] == "exit-later":
        asyncio.get_running_loop().call_soon(sys.exit, 4)  # out of a callback, not the task
        await asyncio.sleep(0.05)
    return payload["do"]
