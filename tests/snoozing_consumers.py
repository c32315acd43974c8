"""A consumer that snoozes, for tests/test_snooze.py: loaded by worker subprocesses with
ALKQUEUE_EXTRA_CONSUMERS=tests.snoozing_consumers, and by the in-process tests on import.

{"snooze": s} snoozes for s seconds on the job's first run; with {"fail_first": True} the
first run fails instead (giving the job a last error) and the second snoozes."""

from __future__ import annotations

from typing import Any

from django_alkqueue import Job, RetryPolicy, Snooze, consumer
from testproject.shop.models import HandlerRun


@consumer("snoozing", max_attempts=3, retry=RetryPolicy(backoff="constant", base=0))
def snooze_once(payload: dict[str, Any], job: Job) -> None:
    runs = HandlerRun.objects.filter(queue=job.queue, job_id=job.id).count()
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts)
    if payload.get("fail_first") and runs == 0:
        raise ConnectionError("first run fails")
    if payload.get("snooze") is not None and runs <= (1 if payload.get("fail_first") else 0):
        raise Snooze(float(payload["snooze"]))
