"""A sensitive queue's consumer whose exceptions quote the payload, imported only by a worker
subprocess of tests/test_worker_privacy.py (ALKQUEUE_EXTRA_CONSUMERS)."""

from __future__ import annotations

from typing import Any

from django_alkqueue import Fail, Job, RetryPolicy, consumer


@consumer("private-cards", sensitive=True, max_attempts=2,
          retry=RetryPolicy(backoff="constant", base=0))  # fmt: skip
def charge(payload: Any, job: Job) -> None:
    try:
        raise LookupError(f"no account for {payload['email']}")
    except LookupError as exc:
        raise ValueError(f"card {payload['card']} declined") from exc


@consumer("private-fail", sensitive=True)
def refuse(payload: Any, job: Job) -> None:
    raise Fail("card refused by the bank")


@consumer("private-interrupt", sensitive=True, max_attempts=1)
def interrupt(payload: Any, job: Job) -> None:
    raise KeyboardInterrupt(f"card {payload['card']}")
