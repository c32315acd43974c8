"""Consumers of running jobs under control (docs/running-jobs.md), for the time limit, cancel
and progress tests: loaded by worker subprocesses with
ALKQUEUE_EXTRA_CONSUMERS=tests.running_consumers, and by the in-process tests on import.
Each handler leaves HandlerRun rows (its own records) saying what it saw."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from django_alkqueue import Cancelled, Job, RetryPolicy, consumer
from testproject.shop.models import HandlerRun

NO_WAIT = RetryPolicy(backoff="constant", base=0)
#: The queues of this module, which the tests unregister after each test.
QUEUES = ("overrunning", "overrunning-batch", "stuck", "cancellable", "cancellable-long-lease",
          "reporting", "cancellable-kept", "self-cancelling-kept", "pids", "overrunning-unwound",
          "killable", "cancel-ignoring", "atomic-second-try", "batch-failing-odd",
          "exiting", "atomic-overrunning", "two-seconds")  # fmt: skip


def record(job: Job, note: str) -> None:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts,
                              worker=job.claimed_by or "", note=note)  # fmt: skip


@consumer("overrunning", timeout=1, max_attempts=3, retry=NO_WAIT)
def overrun(payload: dict[str, Any], job: Any) -> None:
    """Sleeps `sleep` seconds whatever its time limit, flag or not."""
    record(job, f"started; {job.remaining():.1f} s left")
    time.sleep(payload["sleep"])
    record(job, f"woke; cancelled={job.cancelled}")


@consumer("overrunning-batch", batch=5, timeout=1, max_attempts=3, retry=NO_WAIT)
def overrun_batch(jobs: list[Any]) -> None:
    """Sleeps 2.5 s on its jobs' first attempt, then returns at once."""
    for job in jobs:
        record(job, "started")
    if jobs[0].attempts == 1:
        time.sleep(2.5)


@consumer("stuck", timeout=1, max_attempts=1)
def get_stuck(payload: dict[str, Any], job: Any) -> None:
    """Sleeps far past its time limit: its thread is stuck."""
    record(job, "started")
    time.sleep(payload.get("sleep", 600))


@consumer("cancellable", lease=3)
def wait_for_cancel(payload: dict[str, Any], job: Any) -> None:
    """Works in small steps, checking its cancel flag between them, for up to a minute."""
    work_until_cancelled(job)


@consumer("cancellable-long-lease", lease=60)
def wait_for_cancel_long_lease(payload: dict[str, Any], job: Any) -> None:
    """The same with a lease extended every 20 s: only a NOTIFY tells it sooner."""
    work_until_cancelled(job)


@consumer("cancellable-kept", lease=3, keep=3600)
def wait_for_cancel_kept(payload: dict[str, Any], job: Any) -> None:
    """The same on a queue that keeps history: a cancel while it runs is kept as such."""
    work_until_cancelled(job)


@consumer("self-cancelling-kept", keep=3600)
def cancel_itself(payload: dict[str, Any], job: Any) -> None:
    """Gives up on its own job: Cancelled, not an ack."""
    record(job, "started")
    raise Cancelled("nothing left to do")


def work_until_cancelled(job: Any) -> None:
    record(job, "started")
    until = time.monotonic() + 60
    while time.monotonic() < until:
        if job.cancelled:
            record(job, "saw cancel")
            job.check_cancelled()
        time.sleep(0.01)
    record(job, "never cancelled")


@consumer("reporting", lease=30)
def report_progress(payload: dict[str, Any], job: Any) -> None:
    """Reports progress 0..steps at 0.1 s steps, then waits for its cancel."""
    steps = payload.get("steps", 3)
    for done in range(steps + 1):
        job.progress(done, steps, f"step {done}")
        time.sleep(0.1)
    record(job, "reported")
    until = time.monotonic() + 60
    while time.monotonic() < until and not job.cancelled:
        time.sleep(0.02)


# -- the process pool (tests/test_process_pool.py) ---------------------------------------------


@consumer("pids")
def record_pid(payload: dict[str, Any], job: Any) -> None:
    """Records the process it ran in."""
    record(job, f"pid={os.getpid()}")


@consumer("overrunning-unwound", timeout=1, max_attempts=2, retry=NO_WAIT)
def overrun_until_unwound(payload: dict[str, Any], job: Any) -> None:
    """Sleeps past its limit on its first attempt, saying so if something unwinds it."""
    record(job, f"started pid={os.getpid()}")
    if job.attempts > 1:
        return
    try:
        time.sleep(60)
    except BaseException as exc:
        record(job, f"unwound by {type(exc).__name__}")
        raise


@consumer("killable", max_attempts=2, retry=NO_WAIT)
def wait_to_be_killed(payload: dict[str, Any], job: Any) -> None:
    """Waits a minute on its first attempt (for a kill from outside); returns on the next."""
    record(job, f"started pid={os.getpid()}")
    if job.attempts == 1:
        time.sleep(60)
    record(job, f"last error: {job.last_error}")


@consumer("cancel-ignoring", lease=3)
def ignore_cancel(payload: dict[str, Any], job: Any) -> None:
    """Notes its cancel, then keeps sleeping: only its child's end stops it."""
    record(job, f"started pid={os.getpid()}")
    until = time.monotonic() + 60
    while time.monotonic() < until and not job.cancelled:
        time.sleep(0.01)
    record(job, "saw cancel; sleeping on")
    time.sleep(60)


@consumer("atomic-second-try", atomic=True, max_attempts=2, retry=NO_WAIT)
def write_then_fail_once(payload: dict[str, Any], job: Any) -> str:
    """Writes its record in its transaction, then fails its first attempt: that record must
    roll back with it."""
    record(job, f"pid={os.getpid()}")
    if job.attempts == 1:
        raise ValueError("first attempt fails")
    return "done"


@consumer("batch-failing-odd", batch=10, max_attempts=2, retry=NO_WAIT)
def fail_odd_ones_once(jobs: list[Any]) -> dict[int, Exception]:
    """Fails the jobs of odd `n` on their first attempt, by its return value."""
    for job in jobs:
        record(job, f"pid={os.getpid()}")
    return {
        job.id: ValueError(f"odd {job.payload['n']}")
        for job in jobs
        if job.payload["n"] % 2 and job.attempts == 1
    }


@consumer("exiting", max_attempts=2, retry=NO_WAIT)
def exit_on_first_attempt(payload: dict[str, Any], job: Any) -> None:
    """Ends its process with status 3 on its first attempt; returns on the next."""
    record(job, f"started pid={os.getpid()}")
    if job.attempts == 1:
        os._exit(3)
    record(job, f"last error: {job.last_error}")


@consumer("atomic-overrunning", atomic=True, timeout=1, max_attempts=2, retry=NO_WAIT)
def overrun_in_a_transaction(payload: dict[str, Any], job: Any) -> None:
    """Writes its record in its transaction, then sleeps past its limit on its first
    attempt: that record must roll back."""
    record(job, f"last error: {job.last_error}")
    if job.attempts == 1:
        time.sleep(60)


# -- claim ahead (tests/test_worker_claim_ahead.py) -------------------------------------------


@consumer("two-seconds")
def sleep_and_record_times(payload: dict[str, Any], job: Job) -> None:
    """Records when its job was claimed and when it started, then sleeps `seconds`, then
    records when it ended (epoch seconds: the workers run on this host)."""
    claimed = job.claimed_at or (job.lease_expires_at - timedelta(seconds=job.lease))  # type: ignore[operator]
    record(job, f"claimed={claimed.timestamp()} started={time.time()}")
    time.sleep(payload["seconds"])
    record(job, f"ended={time.time()}")
