"""The chaos consumers: one per chaos-* queue, each with the lease and attempts its scenario
needs, all running `act()`, which the payload drives:

    {"ms": 12.5}                     sleep that many milliseconds
    {"fail_on": [1, 2]}              raise ChaosFailure on those attempts (then retried)
    {"exit_on": [1]}                 os._exit the worker process on those attempts
    {"hold": {"1": ["name", 60]}}    on attempt 1, wait until gate "name" opens, at most 60 s
                                     (a null name: just sleep 60 s)
    {"block": {"1": ["name", 60]}}   the same, first marking the execution "blocked": the
                                     scenario runs the worker with no heartbeat for the
                                     queue (ALKQUEUE_CHAOS_NO_HEARTBEATS), so the handler
                                     outlives its lease
    {"leave_open": {"1": "atomic"}}  on attempt 1, mark the execution "failed", then leave a
                                     transaction open ("atomic", "nested", "autocommit") with
                                     a second ExecutionLog row of the same attempt in it: the
                                     worker rolls it back (a row left would read as a second
                                     hand-out) and fails the attempt (TransactionLeftOpen)
    {"system_exit_on": [1]}          chaos-async only: raise SystemExit out of the coroutine
                                     on those attempts, marked "failed"

Every execution is logged in ExecutionLog (see models.py for how a run is read).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from django_alkqueue import Job, RetryPolicy, consumer

from .models import ExecutionLog, Gate

EXIT_CODE = 17
GATE_POLL = 0.05


class ChaosFailure(Exception):
    """The failure a payload asked for."""


def start(job: Job) -> ExecutionLog:
    return ExecutionLog.objects.create(
        job_id=job.id,
        queue=job.queue,
        worker_id=job.claimed_by or "",
        pid=os.getpid(),
        attempt=job.attempts,
        claimed_at=job.claimed_at,
    )


def finish(run: ExecutionLog, outcome: str, note: str = "") -> None:
    fields = {"outcome": outcome, "finished_at": timezone.now()}
    if note:
        fields["note"] = note
    ExecutionLog.objects.filter(pk=run.pk).update(**fields)


def wait_for_gate(name: str | None, timeout: float) -> bool:
    """Wait until the gate opens (True) or `timeout` passes (False); no name: just sleep."""
    if name is None:
        time.sleep(timeout)
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if Gate.objects.filter(name=name).exists():
            return True
        time.sleep(GATE_POLL)
    return False


def digest(payload: Any) -> str:
    """sha256 of the payload as compact JSON: equal digests mean an exact round trip."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def act(payload: dict[str, Any], job: Job) -> None:
    run = start(job)
    attempt = job.attempts
    if attempt in payload.get("exit_on", ()):
        finish(run, "exited")
        os._exit(EXIT_CODE)
    block = payload.get("block", {}).get(str(attempt))
    if block is not None:
        finish(run, "blocked")
        wait_for_gate(block[0], float(block[1]))
    leave = payload.get("leave_open", {}).get(str(attempt))
    if leave is not None:
        finish(run, "failed")
        _leave_open(leave, job)
        return
    hold = payload.get("hold", {}).get(str(attempt))
    if hold is not None:
        wait_for_gate(hold[0], float(hold[1]))
    time.sleep(float(payload.get("ms", 0)) / 1000)
    if attempt in payload.get("fail_on", ()):
        finish(run, "failed")
        raise ChaosFailure(f"failure asked for on attempt {attempt}")
    # A blocked execution stays "blocked" when it returns: its lease lapsed meanwhile, so an
    # accepted ack of it would be a violation the invariant checker reports.
    finish(run, "blocked" if block is not None else "completed")


def _leave_open(how: str, job: Job) -> None:
    """Leave a transaction open, with a row in it that only a commit would keep."""
    if how == "autocommit":
        transaction.set_autocommit(False)
    elif how == "nested":
        with transaction.atomic():
            transaction.atomic().__enter__()
    else:
        transaction.atomic().__enter__()
    start(job)


def _exit_run(job: Job) -> None:
    finish(start(job), "failed")


def _constant(base: float = 0.0) -> RetryPolicy:
    return RetryPolicy(backoff="constant", base=base, jitter=False)


@consumer("chaos-stress", lease=10, max_attempts=3, retry=RetryPolicy(base=0.05))
def stress(payload: dict[str, Any], job: Job) -> None:
    """Scenario 1: short random handler times, random failures retried with backoff."""
    act(payload, job)


@consumer("chaos-crash", lease=2, max_attempts=6, retry=_constant())
def crash(payload: dict[str, Any], job: Job) -> None:
    """Scenario 2: workers SIGKILLed under it; a short lease brings their jobs back fast."""
    act(payload, job)


@consumer("chaos-restart", lease=3, max_attempts=10, retry=_constant(0.1))
def restart(payload: dict[str, Any], job: Job) -> None:
    """Scenario 3: the database restarts under it."""
    act(payload, job)


@consumer("chaos-partition", lease=2, max_attempts=5, retry=_constant())
def partition(payload: dict[str, Any], job: Job) -> None:
    """Scenario 4: a worker cut off from the database mid-job."""
    act(payload, job)


@consumer("chaos-slow", lease=5, max_attempts=10, retry=_constant(0.1))
def slow(payload: dict[str, Any], job: Job) -> None:
    """Scenario 5: the queue table locked under it."""
    act(payload, job)


@consumer("chaos-poison", lease=1, max_attempts=2, retry=_constant())
def poison(payload: dict[str, Any], job: Job) -> None:
    """Scenario 6: raises every time, blocks past its lease, or exits the process."""
    act(payload, job)


@consumer("chaos-flow", lease=5, max_attempts=5, retry=_constant())
def flow(payload: dict[str, Any], job: Job) -> None:
    """Scenario 6: the ordinary jobs that must keep flowing beside the poison ones."""
    act(payload, job)


@consumer("chaos-echo", lease=30, max_attempts=1)
def echo(payload: Any, job: Job) -> None:
    """Scenario 7: records the digest of whatever payload it received."""
    finish(start(job), "completed", note=digest(payload))


@consumer("chaos-hostile", lease=5, max_attempts=3, retry=_constant())
def hostile(payload: dict[str, Any], job: Job) -> None:
    """Scenario 12: some attempts leave a transaction open on the handler thread's connection."""
    act(payload, job)


@consumer("chaos-async", lease=5, max_attempts=3, retry=_constant())
async def run_async(payload: dict[str, Any], job: Job) -> None:
    """Scenario 12: an async handler; some attempts raise SystemExit out of the coroutine."""
    if job.attempts in payload.get("system_exit_on", ()):
        await sync_to_async(_exit_run)(job)
        raise SystemExit(EXIT_CODE)
    await sync_to_async(act)(payload, job)
