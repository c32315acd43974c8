"""Consumers that record durable steps (docs/durable-steps.md), for tests/test_durable_steps.py:
loaded by worker subprocesses with ALKQUEUE_EXTRA_CONSUMERS=tests.step_consumers, and by the
in-process tests on import. Each step's function leaves a HandlerRun row (the handler's own
record) saying it ran, so a test counts the calls of each step's function."""

from __future__ import annotations

import os
import time
from typing import Any

from django_alkqueue import Fail, InvalidOption, Job, RetryPolicy, consumer
from testproject.shop.models import HandlerRun

NO_WAIT = RetryPolicy(backoff="constant", base=0)
#: The queues of this module, which the tests unregister after each test.
QUEUES = ("four-steps", "fail-after-two", "atomic-steps", "batch-steps", "async-steps",
          "waiting-steps", "retrying-steps", "third-fails", "own-step", "async-own-step",
          "no-steps")  # fmt: skip


def record(job: Job, note: str) -> None:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts,
                              worker=job.claimed_by or "", note=note)  # fmt: skip


def _ran(job: Job, name: str) -> dict[str, Any]:
    """A step's function: records that it ran, returns a JSON value naming the step."""
    record(job, f"ran {name}")
    return {"step": name, "pid": os.getpid()}


def _hung(path: str) -> bool:
    return os.path.exists(path)


@consumer("four-steps", lease=1, max_attempts=5, retry=NO_WAIT)
def four_steps(payload: dict[str, Any], job: Any) -> None:
    """Four steps; on its first attempt it hangs after step `hang_after` (until SIGKILLed)."""
    record(job, f"started pid={os.getpid()}")
    values = []
    for i in range(1, 5):
        values.append(job.step(f"s{i}", _ran, job, f"s{i}"))
        if i == payload.get("hang_after") and job.attempts == 1:
            record(job, f"hanging after s{i}")
            time.sleep(600)
    record(job, "done: " + ",".join(v["step"] for v in values))


@consumer("fail-after-two", max_attempts=1, retry=NO_WAIT)
def fail_after_two(payload: dict[str, Any], job: Any) -> None:
    """Steps s1 and s2, then Fail the first time it gets there; s3 once requeued."""
    job.step("s1", _ran, job, "s1")
    job.step("s2", _ran, job, "s2")
    if not HandlerRun.objects.filter(job_id=job.id, note="failing").exists():
        record(job, "failing")
        raise Fail("on purpose")
    job.step("s3", _ran, job, "s3")
    record(job, "done")


def _third(job: Job, fixed: str) -> dict[str, Any]:
    """Step s3's function: fails until the file `fixed` exists (the bug fixed)."""
    if not os.path.exists(fixed):
        record(job, "s3 failed")
        raise RuntimeError("s3 is broken")
    return _ran(job, "s3")


@consumer("third-fails", max_attempts=2, retry=NO_WAIT)
def third_fails(payload: dict[str, Any], job: Any) -> None:
    """Three steps; the third fails every attempt until the file payload["fixed"] exists."""
    job.step("s1", _ran, job, "s1")
    job.step("s2", _ran, job, "s2")
    job.step("s3", _third, job, payload["fixed"])
    record(job, "done")


@consumer("waiting-steps", lease=1, max_attempts=3, retry=NO_WAIT)
def waiting_steps(payload: dict[str, Any], job: Any) -> None:
    """Step s1, then waits for the file `go` to exist, then step s2: what it records of s2
    (or of its refusal) says whether it still held its claim."""
    job.step("s1", _ran, job, "s1")
    record(job, f"waiting pid={os.getpid()}")
    while not _hung(payload["go"]):
        time.sleep(0.05)
    try:
        job.step("s2", _ran, job, "s2")
    except BaseException as exc:
        record(job, f"s2 refused: {type(exc).__name__}: {exc}")
        raise
    record(job, "done")


@consumer("retrying-steps", max_attempts=3, retry=NO_WAIT)
def retrying_steps(payload: dict[str, Any], job: Any) -> None:
    """Step s1, then fails its first attempt; s2 on the retry."""
    job.step("s1", _ran, job, "s1")
    if job.attempts == 1:
        raise RuntimeError("after s1")
    job.step("s2", _ran, job, "s2")


@consumer("atomic-steps", atomic=True, max_attempts=1)
def atomic_steps(payload: dict[str, Any], job: Any) -> None:
    try:
        job.step("s1", _ran, job, "s1")
    except InvalidOption as exc:
        record(job, f"refused: {exc}")


@consumer("batch-steps", batch=5, max_attempts=1)
def batch_steps(jobs: list[Any]) -> None:
    for job in jobs:
        try:
            job.step("s1", _ran, job, "s1")
        except InvalidOption as exc:
            record(job, f"refused: {exc}")


async def _aran(job: Job, name: str) -> dict[str, Any]:
    await HandlerRun.objects.acreate(queue=job.queue, job_id=job.id, attempt=job.attempts,
                                     worker=job.claimed_by or "", note=f"ran {name}")  # fmt: skip
    return {"step": name}


@consumer("async-steps", max_attempts=3, retry=NO_WAIT)
async def async_steps(payload: dict[str, Any], job: Any) -> None:
    """Two awaited steps; the first attempt fails after the first."""
    await job.astep("a1", _aran, job, "a1")
    if job.attempts == 1:
        raise RuntimeError("after a1")
    await job.astep("a2", _aran, job, "a2")


def _own(job: Job) -> dict[str, Any]:
    """Step "own"'s function: records that it ran, returns the id of the job it ran for."""
    record(job, "ran own")
    return {"job": job.id}


@consumer("own-step", max_attempts=1)
def own_step(payload: dict[str, Any], job: Any) -> None:
    """Step "own"; notes the value it got, which names the job it was recorded for."""
    record(job, f"got {job.step('own', _own, job)['job']}")


@consumer("async-own-step", max_attempts=1)
async def async_own_step(payload: dict[str, Any], job: Any) -> None:
    """own-step, awaited."""
    value = await job.astep("own", _own, job)
    await HandlerRun.objects.acreate(queue=job.queue, job_id=job.id, attempt=job.attempts,
                                     note=f"got {value['job']}")  # fmt: skip


@consumer("no-steps", max_attempts=1)
def no_steps(payload: dict[str, Any], job: Any) -> None:
    record(job, "ran")
