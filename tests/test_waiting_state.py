"""A waiting job is a state of its own (issue 49; docs/workflows.md, "How it is stored"): its
live row has no run_at (NULL) while it waits for its dependencies or a signal, its own run_at
(or its wait's deadline) in its WaitingJob row. What copies the live row (dead letters) never
writes a NULL run_at; migration 0021 turns the rows parked in the year 9000 NULL and back."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import override_settings

from django_alkqueue import queue, testing
from django_alkqueue.job_filters import JobFilter, listed
from django_alkqueue.models import DeadLetter, FinishedJob, QueueMessage, WaitingJob
from django_alkqueue.queues import JobHandle
from django_alkqueue.running import Run, running_job
from django_alkqueue.steps import Waiting
from django_alkqueue.worker.step_records import ClaimedSteps
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATION = importlib.import_module("django_alkqueue.migrations.0021_waiting_run_at_null")
PARKED = datetime(9000, 1, 1, tzinfo=UTC)


def run_at_of(job_id: int) -> datetime | None:
    return QueueMessage.objects.values_list("run_at", flat=True).get(pk=job_id)


def waiting_for_signal(name: str, deadline: datetime | None, clock: FakeClock) -> JobHandle:
    """A job of `name` claimed, then waiting for the signal 'approved' until `deadline`."""
    q = queue(name, lease=60, clock=clock)
    q.enqueue({})
    (handle,) = q.claim("tests:1")
    run = Run()
    run.steps = ClaimedSteps("default", handle.claim, clock)
    with pytest.raises(Waiting):
        running_job(handle.job, run).wait_for("approved")
    assert handle.wait("approved", deadline)
    return handle


# -- the rows --------------------------------------------------------------------------------


def test_a_job_waiting_for_its_dependencies_has_no_run_at_in_its_row():
    first = queue("a").enqueue({})
    at = datetime.now(UTC) + timedelta(hours=1)
    second = queue("b").enqueue({}, after=[first], run_at=at)

    assert run_at_of(second.id) is None
    assert WaitingJob.objects.get(job_id=second.id).run_at == at


def test_a_released_job_gets_its_own_run_at_back_in_its_row():
    first = queue("a").enqueue({})
    at = datetime.now(UTC) + timedelta(hours=1)
    second = queue("b").enqueue({}, after=[first], run_at=at)
    [handle] = queue("a").claim("w", 1)
    assert handle.ack()

    assert run_at_of(second.id) == at


def test_a_job_waiting_for_a_signal_without_a_deadline_has_no_run_at_anywhere():
    handle = waiting_for_signal("signals", None, FakeClock())

    assert run_at_of(handle.job.id) is None
    assert WaitingJob.objects.get(job_id=handle.job.id).run_at is None
    found = handle.queue.get_job(handle.job.id)
    assert found is not None and found.state == "waiting" and found.run_at is None


def test_a_job_waiting_for_a_signal_until_a_deadline_reads_with_that_deadline():
    clock = FakeClock()
    deadline = clock() + timedelta(hours=1)
    handle = waiting_for_signal("signals", deadline, clock)

    assert run_at_of(handle.job.id) is None
    found = handle.queue.get_job(handle.job.id)
    assert found is not None and found.state == "waiting" and found.run_at == deadline


def test_waiting_rows_are_neither_pending_nor_scheduled():
    clock = FakeClock()
    handle = waiting_for_signal("signals", None, clock)
    queue("signals", clock=clock).enqueue({}, delay=60)
    live = QueueMessage.objects.filter(queue="signals")

    assert list(live.waiting().values_list("id", flat=True)) == [handle.job.id]
    assert handle.job.id not in live.scheduled(clock()).values_list("id", flat=True)
    assert not live.pending(clock()).exists()
    stats = handle.queue.stats()
    assert (stats.waiting, stats.scheduled, stats.pending) == (1, 1, 0)


def test_the_testing_list_puts_waiting_jobs_last_on_every_database():
    first = queue("order").enqueue({})
    waiting = queue("order").enqueue({}, after=[first])
    later = queue("order").enqueue({}, delay=60)

    assert [job.id for job in testing.jobs("order")] == [first.id, later.id, waiting.id]


# -- what copies a waiting job's row ---------------------------------------------------------


def test_a_job_that_expires_waiting_for_a_signal_dies_with_the_time_it_died_as_run_at():
    clock = FakeClock()
    q = queue("expiring", lease=60, clock=clock)
    q.enqueue({}, expires=60)
    (handle,) = q.claim("tests:1")
    run = Run()
    run.steps = ClaimedSteps("default", handle.claim, clock)
    with pytest.raises(Waiting):
        running_job(handle.job, run).wait_for("approved")
    assert handle.wait("approved", None)
    died = clock.advance(120)

    assert q.sweep_expired() == 1

    dead = DeadLetter.objects.get(job_id=handle.job.id)
    assert (dead.run_at, dead.died_at, dead.reason) == (died, died, "expired")


def test_a_job_that_expires_waiting_for_its_dependencies_dies_with_the_time_it_died():
    clock = FakeClock()
    first = queue("a", clock=clock).enqueue({})
    second = queue("b", clock=clock).enqueue({}, after=[first], expires=60)
    died = clock.advance(120)

    assert queue("b", clock=clock).sweep_expired() == 1

    assert DeadLetter.objects.get(job_id=second.id).run_at == died


def test_a_dead_letter_of_a_job_that_died_waiting_is_requeued_waiting_again_from_now():
    clock = FakeClock()
    first = queue("a", clock=clock).enqueue({})
    second = queue("b", clock=clock).enqueue({}, after=[first], expires=60)
    clock.advance(120)
    assert queue("b", clock=clock).sweep_expired() == 1
    now = clock.advance(1)

    job = queue("b", clock=clock).requeue(second.id)

    assert job is not None and job.state == "waiting" and job.run_at == now
    assert run_at_of(second.id) is None  # its dependency is still live


def test_a_waiting_job_cancelled_leaves_no_row_with_a_null_run_at():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])

    assert queue("b").cancel(second.id)

    assert not QueueMessage.objects.filter(pk=second.id).exists()
    assert not DeadLetter.objects.filter(job_id=second.id).exists()
    kept = FinishedJob.objects.filter(job_id=second.id).values_list("outcome", flat=True)
    assert list(kept) in ([], ["cancelled"])


def test_purging_the_waiting_state_deletes_the_waiting_jobs_only():
    waiting_for_signal("signals", None, FakeClock())
    first = queue("signals").enqueue({})
    queue("signals").enqueue({}, after=[first])

    assert queue("signals").purge(["waiting"]) == 2

    assert list(QueueMessage.objects.values_list("id", flat=True)) == [first.id]


def test_a_waiting_job_is_listed_without_run_at():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])

    (row,) = listed("default", JobFilter(queues=("b",)), datetime.now(UTC), limit=10)

    assert (row.id, row.state, row.run_at) == (second.id, "waiting", None)


# -- migration 0021 --------------------------------------------------------------------------


def migration_apps():
    """The app registry as of migration 0021, from the migration loader (no schema change)."""
    state = MigrationExecutor(connection).loader.project_state(
        ("django_alkqueue", "0021_waiting_run_at_null")
    )
    return state.apps


def test_the_migration_turns_rows_parked_in_the_year_9000_null():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    QueueMessage.objects.filter(pk=second.id).update(run_at=PARKED)
    handle = waiting_for_signal("signals", None, FakeClock())
    WaitingJob.objects.filter(job_id=handle.job.id).update(run_at=PARKED)

    MIGRATION.unpark_rows(migration_apps(), SimpleNamespace(connection=connection))

    assert run_at_of(second.id) is None and run_at_of(handle.job.id) is None
    assert run_at_of(first.id) is not None
    assert WaitingJob.objects.get(job_id=handle.job.id).run_at is None
    assert WaitingJob.objects.get(job_id=second.id).run_at is not None


def test_the_migration_reversed_parks_waiting_rows_in_the_year_9000_again():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    handle = waiting_for_signal("signals", None, FakeClock())

    MIGRATION.park_rows(migration_apps(), SimpleNamespace(connection=connection))

    assert run_at_of(second.id) == run_at_of(handle.job.id) == PARKED
    assert WaitingJob.objects.get(job_id=handle.job.id).run_at == PARKED
    assert run_at_of(first.id) != PARKED


@override_settings(USE_TZ=False)
def test_the_migration_reversed_writes_a_naive_time_without_time_zones():
    assert MIGRATION.parked_at() == datetime(9000, 1, 1)
