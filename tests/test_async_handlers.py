"""`async def` handlers (docs/consumers.md, "Async handlers"): the worker runs them on an event
loop of its own, `--concurrency` bounds how many run at once, and their outcomes follow the
same rules as sync handlers'."""

from __future__ import annotations

import importlib

import pytest

from django_alkqueue import InvalidOption, consumer, queue
from django_alkqueue.consumers import registry
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.testing import Drained, drain
from testproject.shop.models import HandlerRun
from tests.conftest import wait_until
from tests.workers import Watched, run_worker, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

ASYNC = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.async_consumers"}


@pytest.fixture(autouse=True)
def async_consumers():
    """The async queues, registered in this process for the test (a reload re-runs the
    decorators that the last test's teardown unregistered)."""
    import tests.async_consumers

    importlib.reload(tests.async_consumers)
    yield
    for name in ("async-jobs", "async-batch", "async-overrunning", "async-hostile"):
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


def test_an_async_handler_running_three_times_its_lease_keeps_its_claim():
    job = queue("async-jobs", lease=1).enqueue({"sleep": 3})
    # Two workers: a lapsed lease would hand the job to either, as a second attempt.
    args = ("--queue", "async-jobs", "--concurrency", "1", "--poll-interval", "0.1")
    workers = [Watched(start_worker(*args, env=ASYNC)) for _ in range(2)]
    holders: set[str] = set()

    def finished() -> bool:
        row = QueueMessage.objects.filter(id=job.id).first()
        if row is not None and row.claimed_by:
            holders.add(row.claimed_by)
        return row is None

    try:
        wait_until(finished, timeout=30,
                   what="the job acked\n" + "".join(w.output for w in workers))  # fmt: skip
    finally:
        for worker in workers:
            stop(worker.process)
    output = "".join(w.output for w in workers)
    runs = list(HandlerRun.objects.filter(job_id=job.id).values_list("attempt", flat=True))
    assert runs == [1], output  # one run: never reclaimed, never run again
    assert len(holders) == 1, output
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert "heartbeat refused" not in output


def test_an_async_handler_past_its_time_limit_fails_with_time_limit_exceeded_while_it_sleeps():
    job = queue("async-overrunning").enqueue({"sleep": 4})
    worker = Watched(start_worker("--queue", "async-overrunning", "--concurrency", "1",
                                  "--shutdown-timeout", "1", env=ASYNC))  # fmt: skip
    try:
        wait_until(lambda: DeadLetter.objects.filter(job_id=job.id).exists(), timeout=30,
                   what=f"the dead letter\n{worker.output}")  # fmt: skip
        # Failed at its limit, not at its end: the coroutine has not woken yet.
        notes = list(HandlerRun.objects.filter(job_id=job.id).values_list("note", flat=True))
        assert notes == ["started"], worker.output
    finally:
        stop(worker.process)
    dead = DeadLetter.objects.get(job_id=job.id)
    assert dead.last_error == "TimeLimitExceeded: ran longer than 1 s"
    assert dead.reason == "max attempts exceeded"


@pytest.mark.parametrize("pool", [[], ["--pool", "process"]], ids=["threads", "process-pool"])
def test_an_async_handler_that_exits_interrupts_or_stops_the_loop_leaves_it_running(pool):
    """Issue 48, item 1: SystemExit or KeyboardInterrupt out of a coroutine, a stopped loop, a
    callback's SystemExit: those attempts end as a sync handler's would, and the async jobs
    after them still run."""
    hostile = queue("async-hostile", lease=1)
    jobs = {do: hostile.enqueue({"do": do}) for do in ("exit", "interrupt", "stop", "exit-later")}
    worker = Watched(start_worker("--queue", "async-hostile", "--queue", "async-jobs",
                                  "--concurrency", "2", "--poll-interval", "0.1", *pool,
                                  env=ASYNC))  # fmt: skip
    try:
        wait_until(lambda: HandlerRun.objects.filter(queue="async-hostile").count() >= 4,
                   timeout=30, what=f"the hostile jobs ran\n{worker.output}")  # fmt: skip
        later = queue("async-jobs").enqueue_many([{} for _ in range(6)])
        wait_until(lambda: HandlerRun.objects.filter(queue="async-jobs").count() == 6,
                   timeout=30, what=f"the later async jobs ran\n{worker.output}")  # fmt: skip
        wait_until(lambda: not QueueMessage.objects.filter(id__in=[j.id for j in later]).exists(),
                   timeout=30, what=f"the later async jobs acked\n{worker.output}")  # fmt: skip
        wait_until(lambda: DeadLetter.objects.filter(job_id=jobs["exit"].id).exists(),
                   timeout=30, what=f"the exit job dead\n{worker.output}")  # fmt: skip
    finally:
        output = stop(worker.process, timeout=30)
    assert worker.process.returncode == 0, output
    exited = DeadLetter.objects.get(job_id=jobs["exit"].id)
    assert exited.last_error.startswith("SystemExit: 3"), exited.last_error
    for do in ("stop", "exit-later"):  # the loop ran again: the coroutine came back
        assert not QueueMessage.objects.filter(id=jobs[do].id).exists(), (do, output)
        assert not DeadLetter.objects.filter(job_id=jobs[do].id).exists(), (do, output)
    # The interrupted attempt was let go unsettled: never acked, its lease lapses.
    assert (QueueMessage.objects.filter(id=jobs["interrupt"].id).exists()
            or DeadLetter.objects.filter(job_id=jobs["interrupt"].id).exists())  # fmt: skip
