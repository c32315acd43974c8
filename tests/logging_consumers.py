"""Consumers whose jobs fail, for the tests of the worker's line per job
(tests/test_worker_log_lines.py): loaded by worker subprocesses with
ALKQUEUE_EXTRA_CONSUMERS=tests.logging_consumers."""

from __future__ import annotations

from smtplib import SMTPServerDisconnected
from typing import Any

from django_alkqueue import Job, RetryPolicy, consumer

NO_WAIT = RetryPolicy(backoff="constant", base=0)


@consumer("smtp-emails", max_attempts=2, retry=NO_WAIT)
def send(payload: Any, job: Job) -> None:
    raise SMTPServerDisconnected("Connection unexpectedly closed")


@consumer("long-errors", max_attempts=1)
def explain_at_length(payload: Any, job: Job) -> None:
    raise ValueError("x" * 300 + "\nthe second line")
