"""What a handler raises becomes its job's error text: `ExceptionClass: message` (the bare
class name), then the traceback. Any BaseException but KeyboardInterrupt is a failure of
that job, never of the worker: real workers run handlers that raise CancelledError and a
project's own BaseException subclass.

The worker subprocesses import this module as an extra consumer module
(ALKQUEUE_EXTRA_CONSUMERS); the test process itself does not register its consumer.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from django_alkqueue import Job, consumer, queue
from django_alkqueue.jobs import MAX_ATTEMPTS_EXCEEDED
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.worker.executor import error_text, headline
from testproject.shop.consumers import TemporaryError
from testproject.shop.models import HandlerRun
from tests.workers import run_worker

QUEUE = "worker-base-exceptions"
CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": __name__}


class Abandoned(BaseException):
    """A project's own BaseException subclass, outside the Exception tree."""


def interrupted(payload: Any, job: Job) -> None:
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts,
                              worker=str(os.getpid()))  # fmt: skip
    if payload == "cancelled":
        raise asyncio.CancelledError("the coroutine was cancelled")
    raise Abandoned("given up")


if __name__ in os.environ.get("ALKQUEUE_EXTRA_CONSUMERS", "").split(","):
    consumer(QUEUE)(interrupted)


# -- the error text --------------------------------------------------------------------------


def raised(error: BaseException) -> BaseException:
    """`error`, raised and caught, so that it carries a traceback."""
    try:
        raise error
    except BaseException as caught:
        return caught


def test_the_headline_names_a_non_builtin_class_without_its_module():
    assert headline(TemporaryError("smtp 451")) == "TemporaryError: smtp 451"


def test_the_headline_of_an_exception_without_a_message_is_its_class_name():
    assert headline(ValueError()) == "ValueError"
    assert headline(ValueError("")) == "ValueError"


def test_the_error_text_is_the_headline_a_blank_line_then_the_traceback():
    text = error_text(raised(TemporaryError("smtp 451")))

    first, blank, *rest = text.splitlines()
    assert (first, blank) == ("TemporaryError: smtp 451", "")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "testproject.shop.consumers.TemporaryError: smtp 451"


# -- through a real worker -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("payload", "expected"),
    [("cancelled", "CancelledError: the coroutine was cancelled"),
     ("abandoned", "Abandoned: given up")],
)  # fmt: skip
def test_a_base_exception_from_a_handler_fails_its_job_and_the_thread_runs_the_next(
    payload, expected
):
    job = queue(QUEUE, max_attempts=1).enqueue(payload)
    later = queue("shop-reports").enqueue({"n": 1})

    # One thread: had the exception killed it, the burst would never end.
    run_worker("--queue", QUEUE, "--queue", "shop-reports", "--concurrency", "1", "--burst",
               env=CONSUMERS, timeout=60)  # fmt: skip

    letter = DeadLetter.objects.get(job_id=job.id)
    assert letter.reason == MAX_ATTEMPTS_EXCEEDED
    assert letter.last_error.splitlines()[0] == expected
    assert "Traceback (most recent call last)" in letter.last_error
    assert HandlerRun.objects.filter(job_id=later.id).count() == 1
    assert not QueueMessage.objects.exists()
