"""The demo shop's consumers: realistic handlers for the demo and the tests.

Payload flags let the tests and the demo choose an outcome: {"fail_times": n} raises on the
first n attempts, {"fail": "reason"} dead-letters, {"sleep": s} takes its time, ...
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from django_alkqueue import Fail, Job, Retry, RetryPolicy, consumer

from .models import HandlerRun, LedgerEntry


class TemporaryError(Exception):
    """A failure worth a retry (an SMTP 4xx, a timeout)."""


class PermanentError(Exception):
    """A failure no retry will fix (outside the shop-emails consumer's retry_on)."""


def _record(job: Job, note: str = "") -> None:
    HandlerRun.objects.create(
        queue=job.queue, job_id=job.id, attempt=job.attempts, worker=str(os.getpid()), note=note
    )


def _act(payload: Any, job: Job, note: str = "") -> None:
    """Shared behaviour of the demo handlers, driven by the payload."""
    _record(job, note)
    if not isinstance(payload, dict):
        return
    if payload.get("sleep"):
        time.sleep(float(payload["sleep"]))
    if payload.get("exit"):
        os._exit(3)
    if job.attempts <= int(payload.get("fail_times", 0)):
        raise TemporaryError(f"temporary failure on attempt {job.attempts}")
    if payload.get("permanent"):
        raise PermanentError("the address does not exist")
    if payload.get("fail"):
        raise Fail(str(payload["fail"]))
    if payload.get("retry_in") is not None and job.attempts == 1:
        raise Retry(delay=float(payload["retry_in"]))


@consumer(
    "shop-emails",
    lease=30,
    max_attempts=3,
    retry=RetryPolicy(backoff="constant", base=0, retry_on=(TemporaryError,)),
)
def send_email(payload: Any, job: Job) -> None:
    _act(payload, job)


@consumer("shop-reports", max_attempts=3, retry=RetryPolicy(backoff="constant", base=0))
def build_report(payload: Any, job: Job) -> None:
    _act(payload, job)


@consumer("shop-webhooks", max_attempts=2, retry=RetryPolicy(backoff="constant", base=0))
def deliver_webhook(payload: Any, job: Job) -> None:
    _act(payload, job)


@consumer("shop-ledger", atomic=True, max_attempts=3, retry=RetryPolicy(backoff="constant", base=0))
def post_to_ledger(payload: Any, job: Job) -> None:
    LedgerEntry.objects.create(job_id=job.id, amount_cents=int(payload.get("amount", 0)))
    _act(payload, job)


@consumer("shop-noop")
def do_nothing(payload: Any, job: Job) -> None:
    """A no-op handler: what the benchmarks and throughput tests measure."""


@consumer("shop-receipts", batch=50, max_attempts=3, retry=RetryPolicy(backoff="constant", base=0))
def send_receipts(jobs: list[Job]) -> dict[int, BaseException]:
    """A batch consumer: one call sends up to 50 receipts (over one SMTP connection, say).
    Each job's payload flags act on that job alone; the jobs that raised are returned as the
    call's failures, and the rest are acked. Each run's note names its call."""
    call = f"call {uuid.uuid4().hex[:8]} of {len(jobs)}"
    failures: dict[int, BaseException] = {}
    for job in jobs:
        try:
            _act(job.payload, job, call)
        except Exception as error:
            failures[job.id] = error
    return failures


@consumer("shop-throttled", concurrency=1, max_attempts=3)
def call_fragile_api(payload: Any, job: Job) -> None:
    """A global cap in code (one at a time) that the admin's flow-control tests override."""
    _act(payload, job)
