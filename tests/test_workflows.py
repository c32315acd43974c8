"""Workflows through the API, one process (issue 36; docs/workflows.md): dependencies wait,
release on the ack and fail with their dependency; batches fire their callbacks once; chains.
Real workers run them in tests/test_workflow_workers.py."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_alkqueue import (
    InvalidOption,
    Job,
    JobHandle,
    PayloadError,
    batch,
    chain,
    operations,
    queue,
    signals,
)
from django_alkqueue.models import Batch, DeadLetter, Dependency, QueueMessage, WaitingJob
from django_alkqueue.workflows import finishing, sweep
from django_alkqueue.workflows.batches import CALLBACK_KEY
from django_alkqueue.workflows.dependencies import DEPENDENCY_FAILED
from tests.conftest import run_threads

pytestmark = pytest.mark.django_db(transaction=True)


def run_one(name: str) -> Job:
    """Claim and ack the queue's one due job; returns it."""
    [handle] = queue(name).claim("w", 10)
    assert handle.ack()
    return handle.job


def fail_one(name: str) -> Job:
    [handle] = queue(name).claim("w", 10)
    assert handle.fail("boom")
    return handle.job


def ack_together(handles: list[JobHandle]) -> None:
    """Ack each handle in its own thread and connection, the threads started together."""
    run_threads(len(handles), lambda i: handles[i].ack())


def state_of(job: Job) -> str | None:
    found = queue(job.queue).get_job(job.id)
    return None if found is None else found.state


# -- dependencies -----------------------------------------------------------------------------


def test_a_job_after_another_waits_and_is_never_claimed():
    first = queue("a").enqueue({"n": 1})
    second = queue("b").enqueue({"n": 2}, after=[first])
    assert second.state == "waiting"
    assert state_of(second) == "waiting"
    assert queue("b").claim("w", 10) == []


def test_the_dependency_s_ack_releases_the_job_across_queues():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first.id])
    run_one("a")
    assert state_of(second) == "pending"
    assert run_one("b").id == second.id


def test_a_job_waits_for_every_dependency():
    deps = [queue("a").enqueue({"i": i}) for i in range(3)]
    last = queue("b").enqueue({}, after=deps)
    for _ in range(2):
        queue("a").claim("w", 1)[0].ack()
        assert state_of(last) == "waiting"
    queue("a").claim("w", 1)[0].ack()
    assert state_of(last) == "pending"


def test_a_released_job_keeps_its_delay_and_priority():
    first = queue("a").enqueue({})
    later = queue("b").enqueue({}, after=[first], delay=3600, priority=7)
    assert later.run_at > timezone.now() + timedelta(minutes=59)
    run_one("a")
    released = queue("b").get_job(later.id)
    assert released is not None
    assert released.state == "scheduled" and released.priority == 7
    assert abs((released.run_at - later.run_at).total_seconds()) < 1


def test_a_waiting_job_reads_with_the_run_at_it_will_get():
    first = queue("a").enqueue({})
    at = timezone.now() + timedelta(hours=2)
    waiting = queue("b").enqueue({}, after=[first], run_at=at)
    read = queue("b").get_job(waiting.id)
    assert read is not None and read.state == "waiting" and read.run_at == at


def test_enqueue_many_after_makes_every_job_wait():
    first = queue("a").enqueue({})
    jobs = queue("b").enqueue_many([{"i": i} for i in range(5)], after=[first])
    assert {job.state for job in jobs} == {"waiting"}
    run_one("a")
    assert len(queue("b").claim("w", 10)) == 5


def test_a_dependency_already_succeeded_counts_as_done():
    gone = run_one_after_enqueue("a")
    job = queue("b").enqueue({}, after=[gone])
    assert job.state == "pending"
    assert not Dependency.objects.filter(job_id=job.id).exists()


def run_one_after_enqueue(name: str) -> Job:
    queue(name).enqueue({})
    return run_one(name)


def test_an_unknown_dependency_is_refused_and_nothing_is_written():
    with pytest.raises(InvalidOption, match="no job has id"):
        queue("b").enqueue({}, after=[2**62])
    assert not QueueMessage.objects.filter(queue="b").exists()


def test_a_dead_dependency_is_refused_and_nothing_is_written():
    queue("a").enqueue({})
    dead = fail_one("a")
    with pytest.raises(InvalidOption, match="dead letter"):
        queue("b").enqueue({}, after=[dead])
    assert not QueueMessage.objects.filter(queue="b").exists()


@pytest.mark.parametrize("bad", ["7", 7, [True], [0], [-3], ["x"], [1.5]])
def test_after_must_be_a_list_of_jobs_or_ids(bad):
    with pytest.raises(InvalidOption):
        queue("b").enqueue({}, after=bad)


def test_a_dependency_s_death_fails_its_dependents_transitively():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    third = queue("c").enqueue({}, after=[second])
    fail_one("a")
    for job in (second, third):
        dead = DeadLetter.objects.get(job_id=job.id)
        assert dead.reason == DEPENDENCY_FAILED
    assert str(first.id) in DeadLetter.objects.get(job_id=second.id).last_error
    assert str(second.id) in DeadLetter.objects.get(job_id=third.id).last_error
    assert not WaitingJob.objects.exists()


def test_a_dead_dependent_keeps_its_own_run_at():
    first = queue("a").enqueue({})
    at = timezone.now() + timedelta(hours=1)
    second = queue("b").enqueue({}, after=[first], run_at=at)
    fail_one("a")
    assert DeadLetter.objects.get(job_id=second.id).run_at == at


def test_cancelling_a_dependency_fails_its_dependents():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    assert queue("a").cancel(first.id)
    assert DeadLetter.objects.get(job_id=second.id).reason == DEPENDENCY_FAILED


def test_a_dependent_s_death_is_announced_once_committed_and_never_when_rolled_back():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    announced: list[int] = []

    def receiver(sender: object, job: Job, **kwargs: object) -> None:
        announced.append(job.id)

    signals.job_dead_lettered.connect(receiver)
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            assert queue("a").cancel(first.id)
            raise RuntimeError("the caller's transaction rolls back")
        assert announced == []
        assert queue("a").cancel(first.id)
        assert announced == [second.id]
    finally:
        signals.job_dead_lettered.disconnect(receiver)


def test_requeuing_the_dependency_requeues_its_dependents_and_they_wait_again():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    third = queue("c").enqueue({}, after=[second])
    fail_one("a")
    assert queue("a").requeue(first.id) is not None
    assert state_of(second) == "waiting" and state_of(third) == "waiting"
    assert not DeadLetter.objects.exists()
    run_one("a")
    run_one("b")
    assert run_one("c").id == third.id


def test_requeuing_a_dependent_whose_dependency_is_still_dead_fails_it_again():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    fail_one("a")
    queue("b").requeue(second.id)
    assert DeadLetter.objects.get(job_id=second.id).reason == DEPENDENCY_FAILED


def test_two_acks_meeting_a_job_s_last_two_edges_at_once_release_it():
    for _ in range(10):
        deps = [queue("a").enqueue({"i": i}) for i in range(2)]
        last = queue("b").enqueue({}, after=deps)
        handles = queue("a").claim("w", 2)
        ack_together(handles)
        assert state_of(last) == "pending"
        run_one("b")


def test_an_ack_that_waited_for_an_enqueue_after_releases_the_new_dependent():
    """The enqueue holds the dependency's row while its transaction is open; the ack waits
    for it and then settles the edge the enqueue wrote (docs/workflows.md, "The ack")."""
    first = queue("a").enqueue({})
    [handle] = queue("a").claim("w", 1)
    locked = threading.Event()
    written: list[Job] = []

    def body(i: int) -> None:
        if i == 0:
            with transaction.atomic():
                written.append(queue("b").enqueue({}, after=[first]))
                locked.set()
                time.sleep(0.5)  # the ack below starts, and waits for this transaction
        else:
            assert locked.wait(10)
            assert handle.ack()

    run_threads(2, body)
    assert state_of(written[0]) == "pending"


def test_run_now_leaves_waiting_jobs_waiting():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    assert operations.run_now("default", [second.id], timezone.now()) == 0
    assert state_of(second) == "waiting"


def test_stats_count_waiting_jobs_apart_from_scheduled():
    first = queue("a").enqueue({})
    queue("b").enqueue({}, after=[first])
    queue("b").enqueue({}, delay=60)
    stats = queue("b").stats()
    assert (stats.waiting, stats.scheduled, stats.pending) == (1, 1, 0)


def test_the_sweep_releases_a_job_whose_dependency_left_unseen():
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    QueueMessage.objects.filter(pk=first.id).delete()  # an ack that did not settle its edges
    sweep.run("default", timezone.now())
    assert state_of(second) == "pending"


# -- the ack and its follow-ups: one transaction (issue 49) ------------------------------------


class Crash(Exception):
    """The worker dies here."""


def crash_after_the_follow_ups(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ack's follow-ups run (dependents released, batches counted), then the worker dies
    before anything after them."""
    real = finishing.succeeded

    def then_die(*args: object) -> None:
        real(*args)  # type: ignore[arg-type]
        raise Crash

    monkeypatch.setattr(finishing, "succeeded", then_die)


def test_a_crash_after_the_release_undoes_the_ack_with_it(monkeypatch):
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    [handle] = queue("a").claim("w", 1)
    crash_after_the_follow_ups(monkeypatch)
    with pytest.raises(Crash):
        handle.ack()
    assert (state_of(first), state_of(second)) == ("claimed", "waiting")


def test_an_ack_releases_its_dependents_with_no_sweep_run(monkeypatch):
    monkeypatch.setattr(sweep, "run", None)  # the backstop is not there to help
    first = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    [handle] = queue("a").claim("w", 1)
    assert handle.ack()
    assert state_of(second) == "pending"
    assert not Dependency.objects.filter(depends_on=first.id, met=False).exists()


def test_a_crash_after_the_callback_undoes_the_ack_and_the_callback(monkeypatch):
    with batch(on_finish=queue("audit").job({})) as b:
        queue("m").enqueue({})
    [handle] = queue("m").claim("w", 1)
    crash_after_the_follow_ups(monkeypatch)
    with pytest.raises(Crash):
        handle.ack()
    assert state_of(handle.job) == "claimed"
    assert queue("audit").stats().pending == 0
    assert Batch.objects.get(pk=b.id).fired_at is None


def test_plain_and_workflow_jobs_acked_together_each_settle():
    first = queue("a").enqueue({})
    plain = queue("a").enqueue({})
    second = queue("b").enqueue({}, after=[first])
    handles = queue("a").claim("w", 2)
    acked = operations.ack("default", [h.claim for h in handles], timezone.now())
    assert acked == {h.claim for h in handles}
    assert (state_of(first), state_of(plain), state_of(second)) == (None, None, "pending")


def test_the_ack_of_a_plain_job_is_its_one_statement_as_before_workflows():
    """No follow-up for a job in no workflow: PostgreSQL's and SQLite's DELETE (in SQLite's
    BEGIN IMMEDIATE), the ORM dialect's locking read and DELETE."""
    queue("a").enqueue({})
    [handle] = queue("a").claim("w", 1)
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        assert handle.ack()
    statements = [sql for sql in seen if sql != "BEGIN IMMEDIATE"]
    assert all("alkqueue_message" in sql for sql in statements)
    assert len(statements) == (2 if connection.vendor == "mysql" else 1)


# -- batches ----------------------------------------------------------------------------------


def callbacks():
    return {
        "on_success": queue("done").job({"report": 7}),
        "on_finish": queue("audit").job({"nightly": True}),
    }


def test_a_batch_fires_both_callbacks_once_its_members_succeed():
    with batch(**callbacks(), name="nightly") as b:
        queue("m").enqueue_many([{"i": i} for i in range(3)])
        queue("n").enqueue({})
    assert b.counts() == (4, 0, 0, 0, 4)
    for handle in queue("m").claim("w", 10) + queue("n").claim("w", 10):
        handle.ack()
    [success] = queue("done").claim("w", 10)
    [finish] = queue("audit").claim("w", 10)
    assert success.job.payload == {"report": 7, "_alkqueue": {"batch": b.id}}
    assert finish.job.payload == {"nightly": True, "_alkqueue": {"batch": b.id}}
    assert Batch.objects.get(pk=b.id).counts() == (4, 4, 0, 0, 0)


def test_a_batch_with_a_dead_member_fires_only_on_finish():
    with batch(**callbacks()) as b:
        queue("m").enqueue_many([{}, {}])
    first, second = queue("m").claim("w", 10)
    first.ack()
    second.fail("boom")
    assert queue("done").depth() == 0
    assert queue("audit").depth() == 1
    row = Batch.objects.get(pk=b.id)
    assert row.counts().dead == 1 and row.success_job_id is None and row.finish_job_id


def test_a_cancelled_member_counts_as_cancelled():
    with batch(**callbacks()) as b:
        job = queue("m").enqueue({})
    queue("m").cancel(job.id)
    assert Batch.objects.get(pk=b.id).counts().cancelled == 1
    assert queue("audit").depth() == 1 and queue("done").depth() == 0


def test_an_empty_batch_fires_at_the_end_of_its_block():
    with batch(**callbacks()) as b:
        pass
    assert b.fired_at is not None
    assert queue("done").depth() == 1 and queue("audit").depth() == 1


def test_a_batch_rolled_back_leaves_nothing():
    with pytest.raises(RuntimeError), transaction.atomic(), batch(**callbacks()):
        queue("m").enqueue_many([{}, {}])
        raise RuntimeError("rollback")
    assert not Batch.objects.exists()
    assert not QueueMessage.objects.exists()


def test_a_batch_does_not_fire_before_its_block_ends():
    with batch(**callbacks()):
        queue("m").enqueue({})
        run_one("m")  # outside any transaction: the member is done mid-block
        assert queue("audit").depth() == 0
    assert queue("audit").depth() == 1


def test_a_requeued_member_reopens_the_counts_and_the_callbacks_do_not_fire_again():
    with batch(**callbacks()) as b:
        job = queue("m").enqueue({})
    fail_one("m")
    assert queue("audit").depth() == 1
    queue("m").requeue(job.id)
    assert Batch.objects.get(pk=b.id).counts().pending == 1
    run_one("m")
    assert Batch.objects.get(pk=b.id).counts().succeeded == 1
    assert queue("audit").depth() == 1 and queue("done").depth() == 0


def test_only_enqueues_on_the_batch_s_database_and_inside_the_block_join():
    with batch() as b:
        queue("m").enqueue({})
    queue("m").enqueue({})
    assert b.counts().total == 1


def test_batches_do_not_nest_on_one_database():
    with batch(), pytest.raises(InvalidOption, match="already open"), batch():
        pass


@pytest.mark.parametrize(
    "options",
    [
        {"on_success": {"queue": "x"}},
        {"on_finish": "audit"},
        {"name": 7},
        {"name": "x" * 201},
        {"name": "a\x00b"},
        {"name": "file-\udcff"},
    ],
)
def test_bad_batch_arguments_are_refused_before_anything_is_written(options):
    with pytest.raises(InvalidOption):
        batch(**options)
    assert not Batch.objects.exists()


def test_a_callback_payload_must_be_an_object_without_the_batch_key():
    with pytest.raises(InvalidOption, match="JSON object"):
        batch(on_finish=queue("audit").job([1, 2]))
    with pytest.raises(InvalidOption, match="'_alkqueue'"):
        batch(on_finish=queue("audit").job({CALLBACK_KEY: 1}))


@pytest.mark.parametrize("role", ["on_success", "on_finish"])
def test_a_callback_payload_with_a_nul_is_refused_as_a_payload_error(role):
    """The Batch row keeps its callbacks in a jsonb column, which refuses NUL: refused on
    every database, before anything is written, naming where the NUL is."""
    with pytest.raises(PayloadError, match=re.escape(f"{role}'s payload['s']")):
        batch(**{role: queue("audit").job({"s": "a\x00b"})})
    assert not Batch.objects.exists()


def test_the_issue_s_example_runs_as_written():
    users = [1, 2, 3]
    emails = queue("emails")
    with (
        transaction.atomic(),
        batch(
            on_success=queue("reports").job({"report": 7}),
            on_finish=queue("audit").job({"batch": "nightly"}),
        ) as b,
    ):
        for user in users:
            emails.enqueue({"user": user})
    assert b.counts().total == 3
    for handle in emails.claim("w", 10):
        handle.ack()
    [finish] = queue("audit").claim("w", 1)
    assert finish.job.payload == {"batch": "nightly", "_alkqueue": {"batch": b.id}}


def test_the_last_members_finishing_together_fire_the_callbacks_exactly_once():
    for _ in range(15):
        with batch(**callbacks()) as b:
            queue("m").enqueue_many([{"i": i} for i in range(4)])
        handles = queue("m").claim("w", 10)
        ack_together(handles)
        assert queue("done").depth() == 1, b.id
        assert queue("audit").depth() == 1
        queue("done").purge()
        queue("audit").purge()


def test_the_sweep_finishes_a_member_whose_job_left_unseen():
    with batch(**callbacks()) as b:
        job = queue("m").enqueue({})
    QueueMessage.objects.filter(pk=job.id).delete()  # an ack that did not settle its batch
    sweep.run("default", timezone.now())
    assert Batch.objects.get(pk=b.id).counts().succeeded == 1
    assert queue("done").depth() == 1


def test_purging_a_member_counts_as_cancelling_it():
    with batch(**callbacks()) as b:
        queue("m").enqueue({})
    assert queue("m").purge() == 1
    assert Batch.objects.get(pk=b.id).counts().cancelled == 1


# -- Queue.job and chains -----------------------------------------------------------------------


def test_queue_job_writes_nothing_and_checks_its_options():
    spec = queue("a").job({"x": 1}, priority=3, delay=5)
    assert spec.queue == "a" and spec.options == {"priority": 3, "delay": 5}
    assert not QueueMessage.objects.exists()
    with pytest.raises(InvalidOption):
        queue("a").job({}, priority="high")
    with pytest.raises(InvalidOption):
        queue("a").job({}, after=[1])


def test_a_chain_runs_its_jobs_one_after_another_across_queues():
    jobs = chain(queue("a").job(1), queue("b").job(2), queue("c").job(3))
    assert [job.state for job in jobs] == ["pending", "waiting", "waiting"]
    assert [d.depends_on for d in Dependency.objects.order_by("job_id")] == [jobs[0].id, jobs[1].id]
    assert queue("b").claim("w", 1) == [] and queue("c").claim("w", 1) == []
    assert [run_one(name).id for name in ("a", "b", "c")] == [job.id for job in jobs]


def test_a_chain_takes_only_queue_jobs():
    with pytest.raises(InvalidOption):
        chain({"queue": "a"})
    with pytest.raises(InvalidOption):
        chain()
