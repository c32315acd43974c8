"""Issue 52: a dead letter keeps its job's fair key, whichever way the job died, and a requeue
gives the key back, so a requeued job takes its turns again (docs/fair-share.md, "Dead
letters"). The admin's and alk_jobs' side is in tests/test_admin_fair_share.py and
tests/test_alk_jobs.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_alkqueue import operations
from django_alkqueue.models import DeadLetter, JobStep, QueueMessage
from django_alkqueue.queues import Queue
from django_alkqueue.worker.maintenance import ReclaimService, SweepService
from django_alkqueue.workflows.dependencies import DEPENDENCY_FAILED

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "fair-dead"


@pytest.fixture
def fq(make_queue: Callable[..., Queue]) -> Queue:
    return make_queue(QUEUE)


def dead_key(job_id: int) -> str | None:
    return DeadLetter.objects.get(job_id=job_id).fair_key


# -- every death keeps the key -------------------------------------------------------------


def test_a_job_retried_out_of_its_attempts_keeps_its_fair_key(fq: Queue) -> None:
    job = fq.enqueue(1, max_attempts=1, fair_key="tenant-a")
    assert fq.claim_one("w").retry("boom")
    assert dead_key(job.id) == "tenant-a"


def test_a_failed_job_keeps_its_fair_key(fq: Queue) -> None:
    job = fq.enqueue(1, fair_key="tenant-a")
    assert fq.claim_one("w").fail("card declined")
    assert dead_key(job.id) == "tenant-a"


def test_a_job_that_crashed_its_worker_twice_keeps_its_fair_key(fq: Queue, clock) -> None:
    job = fq.enqueue(1, fair_key="tenant-a")
    operations.crashed(fq.using, fq.claim_one("w1").claim, clock())
    clock.advance(1)
    valid, dead = operations.crashed(fq.using, fq.claim_one("w2").claim, clock())
    assert valid and dead is not None
    assert dead_key(job.id) == "tenant-a"


def test_a_lapsed_claim_past_its_attempts_swept_by_the_reclaim_keeps_its_fair_key(
    fq: Queue, clock
) -> None:
    job = fq.enqueue(1, max_attempts=1, fair_key="tenant-a")
    fq.claim_one("crashed")
    clock.advance(31)
    assert ReclaimService("default").run_once(clock()) == (0, 1)
    assert dead_key(job.id) == "tenant-a"


def test_a_lapsed_claim_past_its_attempts_taken_by_a_plain_claim_keeps_its_fair_key(
    fq: Queue, clock
) -> None:
    # No unclaimed job has a fair key: the queue's claim is its one plain statement.
    job = fq.enqueue(1, max_attempts=1, fair_key="tenant-a")
    fq.claim_one("crashed")
    clock.advance(31)
    assert fq.claim("w", 1) == []
    assert dead_key(job.id) == "tenant-a"


def test_a_lapsed_claim_past_its_attempts_taken_by_a_fair_claim_keeps_its_fair_key(
    fq: Queue, clock
) -> None:
    job = fq.enqueue(1, max_attempts=1, fair_key="tenant-a")
    fq.claim_one("crashed")
    waiting = fq.enqueue(2, fair_key="tenant-b")  # the queue takes turns
    clock.advance(31)
    assert [h.job.id for h in fq.claim("w", 1)] == [waiting.id]
    assert dead_key(job.id) == "tenant-a"


def test_an_expired_job_keeps_its_fair_key(fq: Queue, clock) -> None:
    job = fq.enqueue(1, expires=5, fair_key="tenant-a")
    clock.advance(6)
    SweepService("default").run_once(clock())
    assert dead_key(job.id) == "tenant-a"


def test_a_dependent_that_died_for_its_dependency_keeps_its_fair_key(fq: Queue) -> None:
    first = fq.enqueue(1)
    second = fq.enqueue(2, after=[first], fair_key="tenant-a")
    assert fq.claim_one("w").fail()
    assert DeadLetter.objects.get(job_id=second.id).reason == DEPENDENCY_FAILED
    assert dead_key(second.id) == "tenant-a"


def test_a_job_without_a_fair_key_dies_without_one(fq: Queue) -> None:
    job = fq.enqueue(1)
    assert fq.claim_one("w").fail()
    assert dead_key(job.id) is None


# -- the requeue gives it back -------------------------------------------------------------


def test_requeue_gives_the_job_its_fair_key_back(fq: Queue) -> None:
    job = fq.enqueue(1, fair_key="tenant-a")
    assert fq.claim_one("w").fail()
    assert fq.requeue(job.id) is not None
    assert QueueMessage.objects.get(id=job.id).fair_key == "tenant-a"


def test_a_requeued_job_takes_its_turns_again(fq: Queue, clock) -> None:
    # They die unclaimed (expired), so tenant-a has had no turn before its requeue.
    dead = [fq.enqueue(f"a{n}", expires=5, fair_key="tenant-a") for n in range(2)]
    clock.advance(6)
    SweepService("default").run_once(clock())
    fq.enqueue_many(["b0", "b1"], fair_key="tenant-b")
    fq.enqueue_many(["n0", "n1"])
    clock.advance(1)  # without their key, the requeued jobs would queue behind n0 and n1
    for job in dead:
        fq.requeue(job.id)
    first_round = [h.job.payload for h in fq.claim("w", 3)]
    assert sorted(payload[0] for payload in first_round) == ["a", "b", "n"]


def test_requeuing_a_dependency_gives_its_dependents_their_fair_keys_back(fq: Queue) -> None:
    first = fq.enqueue(1, fair_key="tenant-a")
    second = fq.enqueue(2, after=[first], fair_key="tenant-b")
    assert fq.claim_one("w").fail()
    assert fq.requeue(first.id) is not None
    keys = dict(QueueMessage.objects.values_list("id", "fair_key"))
    assert keys == {first.id: "tenant-a", second.id: "tenant-b"}


def test_requeue_from_step_gives_the_fair_key_back_too(fq: Queue, clock) -> None:
    job = fq.enqueue(1, fair_key="tenant-a")
    assert fq.claim_one("w").fail()
    JobStep.objects.create(job_id=job.id, name="fetch", value=1, recorded_at=clock(), attempt=1,
                           duration=0.1)  # fmt: skip
    assert operations.requeue_from_step(fq.using, job.id, "fetch", clock()).requeued
    assert QueueMessage.objects.get(id=job.id).fair_key == "tenant-a"
