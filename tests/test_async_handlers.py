"""`async def` handlers (docs/consumers.md, "Async handlers"): the worker runs them on an event
loop of its own, `--concurrency` bounds how many run at once, and their outcomes follow the
same rules as sync handlers'."""

from __future__ import annotations

import importlib

import pytest

from django_alkqueue import InvalidOption, consumer, queue
from django_alkqueue.consumers import registry
from django_alkqueue.models import QueueMessage
from django_alkqueue.testing import Drained, drain
from testproject.shop.models import HandlerRun
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)

ASYNC = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.async_consumers"}


@pytest.fixture(autouse=True)
def async_consumers():
    """The two async queues, registered in this process for the test (a reload re-runs the
    decorators that the last test's teardown unregistered)."""
    import tests.async_consumers

    importlib.reload(tests.async_consumers)
    yield
    for name in ("async-jobs", "async-batch"):
        registry.unregister(name)


def test_a_worker_runs_async_handlers_at_most_concurrency_at_once():
    queue("async-jobs").enqueue_many([{"sleep": 0.4} for _ in range(12)])

    run_worker("--queue", "async-jobs", "--concurrency", "4", "--burst", env=ASYNC)

    runs = HandlerRun.objects.filter(queue="async-jobs")
    assert runs.count() == 12
    in_flight = [int(note.removeprefix("running=")) for note in runs.values_list("note", flat=True)]
    assert max(in_flight) == 4, in_flight  # four coroutines at once: the threads' count
    assert not QueueMessage.objects.exists()


def test_an_async_handlers_failure_is_retried_by_its_policy():
    job = queue("async-jobs").enqueue({"fail_times": 1})

    assert drain("async-jobs") == Drained(succeeded=1, retried=1)
    assert HandlerRun.objects.filter(job_id=job.id).count() == 2


def test_an_async_batch_handler_takes_its_jobs_in_one_call():
    queue("async-batch").enqueue_many([{} for _ in range(25)])

    assert drain("async-batch").succeeded == 25
    assert HandlerRun.objects.filter(queue="async-batch").count() == 25


def test_an_async_handler_cannot_be_atomic():
    with pytest.raises(InvalidOption, match="an async handler cannot be atomic"):

        @consumer("async-atomic", atomic=True)
        async def handler(payload, job):
            return None

    assert registry.get("async-atomic") is None
