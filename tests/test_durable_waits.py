"""Sleeps and signals of durable steps (docs/durable-steps.md): `job.sleep`, `job.wait_for`,
`Queue.signal` and `alk_jobs signal`. In-process tests drive claimed jobs on the real
database; the worker tests run real `alk_worker` subprocesses and read the handlers' own
records (HandlerRun rows)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.db import transaction

from django_alkqueue import (
    AlkQueueError,
    InvalidOption,
    PayloadError,
    WaitTimedOut,
    operations,
    queue,
)
from django_alkqueue.consumers import registry
from django_alkqueue.models import JobSignal, JobStep, QueueMessage, WaitingJob
from django_alkqueue.queues import JobHandle
from django_alkqueue.running import Run, RunningJob, running_job
from django_alkqueue.steps import Sleeping, Waiting
from django_alkqueue.worker.history_sweeper import HistoryService
from django_alkqueue.worker.maintenance import WaitReleaseService
from django_alkqueue.worker.step_records import ClaimedSteps
from testproject.shop.models import HandlerRun
from tests.clocks import FakeClock
from tests.conftest import wait_until
from tests.workers import Watched, run_manage, run_worker, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.wait_consumers"}


@pytest.fixture(autouse=True)
def wait_consumers() -> Iterator[None]:
    import tests.wait_consumers

    importlib.reload(tests.wait_consumers)
    yield
    for name in tests.wait_consumers.QUEUES:
        registry.unregister(name)


def notes(job_id: int) -> list[str]:
    return list(
        HandlerRun.objects.filter(job_id=job_id).order_by("id").values_list("note", flat=True)
    )


def claimed(name: str = "in-process", clock: Any = None) -> tuple[JobHandle, RunningJob]:
    """A job claimed in this process, and the `job` its handler would get."""
    q = queue(name, lease=60) if clock is None else queue(name, lease=60, clock=clock)
    q.enqueue({"n": 1})
    (handle,) = q.claim("tests:1")
    return handle, as_handler_sees(handle)


def as_handler_sees(handle: JobHandle) -> RunningJob:
    run = Run()
    run.steps = ClaimedSteps("default", handle.claim, handle.queue.clock)
    return running_job(handle.job, run)


def steps_of(job_id: int) -> list[tuple[str, object]]:
    return list(JobStep.objects.filter(job_id=job_id).order_by("id").values_list("name", "value"))


def state_of(job_id: int) -> str | None:
    job = operations.get_job("default", job_id, queue("any").clock())
    return None if job is None else job.state


# -- job.sleep, in process ---------------------------------------------------------------------


def test_a_sleep_records_its_wake_time_and_ends_the_call_until_it_has_passed():
    clock = FakeClock()
    handle, job = claimed(clock=clock)
    with pytest.raises(Sleeping) as slept:
        job.sleep("nap", timedelta(minutes=5))
    assert slept.value.until == clock() + timedelta(minutes=5)
    (step,) = JobStep.objects.filter(job_id=handle.job.id)
    assert step.name == "nap" and step.value == {"sleep_until": slept.value.until.isoformat()}

    assert handle.sleep(slept.value.until)
    row = QueueMessage.objects.get(id=handle.job.id)
    assert row.claim_token is None and row.attempts == 0  # scheduled, its attempt refunded
    assert state_of(handle.job.id) == "scheduled"

    clock.advance(minutes=5)
    (again,) = queue("in-process", clock=clock).claim("tests:1")
    as_handler_sees(again).sleep("nap", timedelta(minutes=5))  # returns: the time has passed


@pytest.mark.parametrize(
    "when", [datetime(2030, 1, 1), timedelta(0), -1, 0, float("nan"), "5s", None]
)
def test_a_naive_datetime_or_a_bad_duration_is_invalid_and_nothing_is_recorded(when: Any):
    handle, job = claimed()
    with pytest.raises(InvalidOption):
        job.sleep("nap", when)
    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


def test_a_sleep_to_an_aware_datetime_already_past_returns_at_once():
    handle, job = claimed()
    job.sleep("nap", handle.queue.clock() - timedelta(seconds=1))
    assert JobStep.objects.filter(job_id=handle.job.id, name="nap").exists()


def test_a_sleep_shares_the_names_of_the_run_with_the_steps():
    _handle, job = claimed()
    job.step("nap", lambda: 1)
    with pytest.raises(InvalidOption, match="used twice"):
        job.sleep("nap", 60)


# -- Queue.signal and job.wait_for, in process -----------------------------------------------


def test_signal_returns_false_for_an_unknown_a_finished_and_a_foreign_job():
    q = queue("in-process")
    assert q.signal(987_654_321, "approved") is False
    done = q.enqueue({})
    (handle,) = q.claim("tests:1")
    assert handle.ack()
    assert q.signal(done.id, "approved") is False
    other = queue("elsewhere").enqueue({})
    assert q.signal(other.id, "approved") is False  # a job of another queue
    assert not JobSignal.objects.exists()


def test_a_second_signal_of_the_same_name_is_refused_and_the_first_stays():
    q = queue("in-process")
    job = q.enqueue({})
    assert q.signal(job.id, "approved", {"by": "ann"}) is True
    assert q.signal(job.id, "approved", {"by": "bob"}) is False
    assert q.signal(job.id, "rejected") is True  # another name
    assert JobSignal.objects.get(job_id=job.id, name="approved").payload == {"by": "ann"}


@pytest.mark.parametrize("name", ["", "x" * 201, "a\x00b", 7])
def test_a_bad_signal_name_is_invalid_and_nothing_is_written(name: Any):
    q = queue("in-process")
    job = q.enqueue({})
    with pytest.raises(InvalidOption):
        q.signal(job.id, name)
    assert not JobSignal.objects.exists()


def test_a_payload_not_storable_is_a_payload_error_and_nothing_is_written():
    q = queue("in-process")
    job = q.enqueue({})
    with pytest.raises(PayloadError):
        q.signal(job.id, "approved", {"at": (1, 2)})
    with pytest.raises(PayloadError):
        q.signal(job.id, "approved", float("nan"))
    assert not JobSignal.objects.exists()


def test_wait_for_returns_a_signal_sent_before_and_records_it():
    handle, job = claimed()
    assert handle.queue.signal(handle.job.id, "approved", {"by": "ann"})
    assert job.wait_for("approved") == {"by": "ann"}
    assert JobStep.objects.get(job_id=handle.job.id, name="approved").value == {
        "signal": {"by": "ann"}
    }


def test_a_job_waits_for_its_signal_and_the_signal_makes_it_pending():
    handle, job = claimed()
    with pytest.raises(Waiting) as waiting:
        job.wait_for("approved")
    assert handle.wait(waiting.value.name, waiting.value.deadline)
    found = handle.queue.get_job(handle.job.id)
    assert found is not None and found.state == "waiting" and found.attempts == 0
    assert found.reason == "waiting for signal 'approved'"
    assert handle.queue.claim("tests:1") == []  # never due while it waits
    assert handle.queue.stats().waiting == 1

    assert handle.queue.signal(handle.job.id, "approved", {"by": "bob"})
    assert state_of(handle.job.id) == "pending"
    assert not WaitingJob.objects.filter(job_id=handle.job.id).exists()
    (again,) = handle.queue.claim("tests:1")
    assert as_handler_sees(again).wait_for("approved") == {"by": "bob"}


def test_another_signal_leaves_a_waiting_job_waiting():
    handle, job = claimed()
    with pytest.raises(Waiting):
        job.wait_for("approved")
    assert handle.wait("approved", None)
    assert handle.queue.signal(handle.job.id, "rejected")
    assert state_of(handle.job.id) == "waiting"


def test_a_signal_that_came_before_the_wait_was_written_makes_the_job_pending_at_once():
    handle, job = claimed()
    with pytest.raises(Waiting):
        job.wait_for("approved")
    assert handle.queue.signal(handle.job.id, "approved")  # while the handler still ends
    assert handle.wait("approved", None)
    assert state_of(handle.job.id) == "pending"


def test_a_signal_in_a_rolled_back_transaction_is_not_delivered():
    handle, job = claimed()
    with pytest.raises(Waiting):
        job.wait_for("approved")
    assert handle.wait("approved", None)

    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), transaction.atomic():
        assert handle.queue.signal(handle.job.id, "approved", {"by": "ann"})
        raise RolledBack
    assert state_of(handle.job.id) == "waiting"
    assert not JobSignal.objects.exists()
    assert handle.queue.signal(handle.job.id, "approved", {"by": "bob"})  # still the first
    assert state_of(handle.job.id) == "pending"


def test_a_timed_wait_resumes_at_its_deadline_as_timed_out_and_keeps_that_answer():
    clock = FakeClock()
    handle, job = claimed(clock=clock)
    with pytest.raises(Waiting) as waiting:
        job.wait_for("approved", timeout=timedelta(hours=1))
    assert waiting.value.deadline == clock() + timedelta(hours=1)
    assert handle.wait("approved", waiting.value.deadline)
    releaser = WaitReleaseService("default")
    assert releaser.run_once(clock()) == 0  # not yet
    assert state_of(handle.job.id) == "waiting"

    clock.advance(hours=1)
    assert releaser.run_once(clock()) == 1
    found = handle.queue.get_job(handle.job.id)
    assert found is not None and found.state == "pending"
    assert handle.queue.signal(handle.job.id, "approved", {"by": "late"})  # after the timeout
    (again,) = handle.queue.claim("tests:1")
    with pytest.raises(WaitTimedOut) as timed_out:
        as_handler_sees(again).wait_for("approved", timeout=timedelta(hours=1))
    assert isinstance(timed_out.value, AlkQueueError) and timed_out.value.name == "approved"


def test_the_history_sweep_deletes_the_wait_of_a_cancelled_job_without_a_deadline():
    handle, job = claimed()
    with pytest.raises(Waiting):
        job.wait_for("approved")
    assert handle.wait("approved", None)
    other, _job = claimed()
    assert other.wait("approved", None)
    assert handle.queue.cancel(handle.job.id)
    HistoryService("default").run_once(handle.queue.clock())
    assert list(WaitingJob.objects.values_list("job_id", flat=True)) == [other.job.id]


def test_a_waiting_job_can_be_cancelled_and_its_wait_and_signals_go():
    handle, job = claimed()
    assert handle.queue.signal(handle.job.id, "other")
    with pytest.raises(Waiting):
        job.wait_for("approved", timeout=1)
    assert handle.wait("approved", handle.queue.clock() - timedelta(seconds=1))
    assert handle.queue.cancel(handle.job.id)
    assert WaitReleaseService("default").run_once(handle.queue.clock()) == 0  # nothing resumes
    assert not WaitingJob.objects.exists()
    HistoryService("default").run_once(handle.queue.clock())
    assert not JobSignal.objects.exists()


# -- real workers ----------------------------------------------------------------------------


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_sleeping_jobs_free_their_threads_and_the_others_are_not_delayed(pool: str):
    sleepers = queue("sleepers").enqueue_many([{"seconds": 4}] * 4)
    quick = queue("quick").enqueue_many([{}] * 6)
    worker = Watched(start_worker("--queue", "sleepers", "--queue", "quick", "--concurrency",
                                  "2", "--pool", pool, env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: all(notes(job.id) == ["ran"] for job in quick), timeout=30,
                   what=f"the quick jobs ran\n{worker.output}")  # fmt: skip
        # A sleeper's note is written before its park commits: wait for both.
        asleep = QueueMessage.objects.filter(id__in=[job.id for job in sleepers])
        wait_until(lambda: all(notes(job.id) == ["started"] for job in sleepers)
                   and all(row.claim_token is None and row.attempts == 0 for row in asleep.all()),
                   timeout=3, what=f"the sleepers parked\n{worker.output}")  # fmt: skip
        wait_until(lambda: all(notes(job.id)[-1:] == ["woke"] for job in sleepers), timeout=30,
                   what=f"the sleepers woke\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    for job in sleepers:
        assert notes(job.id) == ["started", "started", "woke"]
    assert not JobStep.objects.exists()  # deleted with the acks


def test_a_sleeping_job_holds_no_slot_of_its_queues_concurrency():
    sleeper = queue("one-at-a-time").enqueue({"sleep": 2.5})
    others = queue("one-at-a-time").enqueue_many([{}, {}], run_at=queue("x").clock()
                                                 + timedelta(seconds=0.5))  # fmt: skip
    worker = Watched(start_worker("--queue", "one-at-a-time", "--concurrency", "2",
                                  env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: all(notes(job.id) == ["ran"] for job in others), timeout=30,
                   what=f"the others ran while it slept\n{worker.output}")  # fmt: skip
        assert notes(sleeper.id) == []
        wait_until(lambda: notes(sleeper.id) == ["woke"], timeout=30,
                   what=f"the sleeper woke\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)


def test_a_signal_sent_before_wait_for_is_returned_at_once():
    job = queue("approvals").enqueue({})
    assert queue("approvals").signal(job.id, "approved", {"by": "ann"})

    run_worker("--queue", "approvals", "--burst", env=CONSUMERS)

    assert notes(job.id) == ["asked", "approved by ann"]
    assert not QueueMessage.objects.filter(id=job.id).exists()
    assert not JobSignal.objects.exists() and not JobStep.objects.exists()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_signal_sent_after_wait_for_wakes_the_waiting_job(pool: str):
    job = queue("approvals").enqueue({})
    worker = Watched(start_worker("--queue", "approvals", "--pool", pool, env=CONSUMERS))
    try:
        wait_until(lambda: state_of(job.id) == "waiting", timeout=30,
                   what=f"the job waits\n{worker.output}")  # fmt: skip
        assert notes(job.id) == ["asked"]
        sent = time.monotonic()
        assert queue("approvals").signal(job.id, "approved", {"by": "bob"})
        wait_until(lambda: notes(job.id)[-1:] == ["approved by bob"], timeout=30,
                   what=f"the job resumed\n{worker.output}")  # fmt: skip
        assert time.monotonic() - sent < 5  # woken, not found by a slow poll
    finally:
        stop(worker.process)
    assert notes(job.id) == ["asked", "asked", "approved by bob"]


def test_a_wait_that_times_out_raises_wait_timed_out_and_its_retry_gets_the_same():
    job = queue("timed-approvals").enqueue({})
    fast = {**CONSUMERS, "ALKQUEUE_RECLAIM_INTERVAL": "0.2"}  # the leader looks 5 times a second
    worker = Watched(start_worker("--queue", "timed-approvals", env=fast))
    try:
        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), timeout=30,
                   what=f"the job finished\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    timed_out = "timed out: no signal 'approved' came before the wait's deadline"
    assert notes(job.id) == [timed_out, timed_out]  # the retry did not wait again
    runs = HandlerRun.objects.filter(job_id=job.id).order_by("id")
    assert [run.attempt for run in runs] == [1, 2]


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_sleep_and_wait_for_are_refused_in_atomic_and_batch_consumers(pool: str):
    atomic = queue("atomic-waits").enqueue({})
    batch = queue("batch-waits").enqueue_many([{}, {}])

    run_worker("--queue", "atomic-waits", "--queue", "batch-waits", "--pool", pool, "--burst",
               env=CONSUMERS)  # fmt: skip

    assert notes(atomic.id) == [
        "sleep refused: job.sleep cannot run in an atomic consumer: its record would roll "
        "back with the handler's transaction (docs/durable-steps.md)",
        "wait_for refused: job.wait_for cannot run in an atomic consumer: its record would "
        "roll back with the handler's transaction (docs/durable-steps.md)",
    ]
    for job in batch:
        sleep, wait = notes(job.id)
        assert sleep.startswith("sleep refused: job.sleep cannot run in a batch consumer")
        assert wait.startswith("wait_for refused: job.wait_for cannot run in a batch consumer")
    assert not QueueMessage.objects.exists() and not JobStep.objects.exists()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_an_async_handler_sleeps_and_awaits_its_signal(pool: str):
    job = queue("async-waits").enqueue({})
    worker = Watched(start_worker("--queue", "async-waits", "--pool", pool, env=CONSUMERS))
    try:
        wait_until(lambda: state_of(job.id) == "waiting", timeout=30,
                   what=lambda: f"the job waits (it is {state_of(job.id)}, steps "
                                f"{steps_of(job.id)})\n{worker.output}")  # fmt: skip
        assert queue("async-waits").signal(job.id, "go", 7)
        wait_until(lambda: notes(job.id) == ["got 7"], timeout=30,
                   what=lambda: f"the job resumed\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)


# -- alk_jobs signal -------------------------------------------------------------------------


def test_alk_jobs_signal_delivers_once_audits_and_exits_as_the_other_subcommands():
    q = queue("approvals")
    job = q.enqueue({})

    sent = run_manage("alk_jobs", "signal", str(job.id), "approved", "--payload", '{"by": "cli"}')
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == f"sent signal 'approved' to job {job.id}"
    assert JobSignal.objects.get(job_id=job.id).payload == {"by": "cli"}
    entry = LogEntry.objects.order_by("-id").first()
    assert entry is not None and entry.change_message.startswith("signal: 1 job; ids")
    assert "signal 'approved'" in entry.change_message

    again = run_manage("alk_jobs", "signal", str(job.id), "approved")  # the first stays
    assert again.returncode == 1
    assert f"job {job.id} is not live, or has a signal 'approved' already" in again.stdout
    refused = run_manage("alk_jobs", "signal", str(job.id), "other", "--payload", "{nope")
    assert refused.returncode == 2 and "not JSON" in refused.stderr
    assert JobSignal.objects.filter(job_id=job.id).count() == 1
    assert operations.get_job("default", job.id, q.clock()) is not None
