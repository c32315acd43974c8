"""The invariant checker catches what it must: each violation planted in the rows directly
(no worker), next to the clean cases it must let pass."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.chaos.models import AckLog, ExecutionLog

from .invariants import Fault, check

pytestmark = pytest.mark.django_db

T0 = timezone.now()


def job() -> int:
    return queue("chaos-stress").enqueue({}).id


def run(job_id: int, attempt: int, outcome: str, worker: str = "w1", at: int = 0) -> None:
    claimed = T0 + timedelta(seconds=at or attempt)
    ExecutionLog.objects.create(
        job_id=job_id,
        queue="chaos-stress",
        worker_id=worker,
        pid=1,
        attempt=attempt,
        claimed_at=claimed,
        started_at=claimed,
        outcome=outcome,
    )


def ack(job_id: int, attempt: int, worker: str = "w1", at: int = 0) -> None:
    AckLog.objects.create(
        job_id=job_id,
        queue="chaos-stress",
        worker_id=worker,
        attempt=attempt,
        claimed_at=T0 + timedelta(seconds=at or attempt),
    )


def acked(job_id: int) -> None:
    QueueMessage.objects.filter(pk=job_id).delete()


def test_a_job_run_once_and_acked_once_passes():
    j = job()
    run(j, 1, "completed")
    ack(j, 1)
    acked(j)

    report = check([j])

    assert report.ok, report.problems
    assert (report.figures.acked, report.figures.duplicates) == (1, 0)


def test_a_retry_explains_the_next_run():
    j = job()
    run(j, 1, "failed")
    run(j, 2, "completed")
    ack(j, 2)
    acked(j)

    report = check([j])

    assert report.ok, report.problems
    assert report.figures.duplicate_causes == {"retry": 1}


def test_a_job_gone_without_any_completed_run_is_lost():
    j = job()
    run(j, 1, "")
    acked(j)

    report = check([j])

    assert report.figures.lost == 1 and not report.ok


def test_two_confirmed_acks_are_a_double_ack():
    j = job()
    run(j, 1, "completed")
    run(j, 2, "completed", worker="w2")
    ack(j, 1)
    ack(j, 2, worker="w2")
    acked(j)

    report = check([j], [Fault("kill", T0, T0 + timedelta(seconds=5))])

    assert report.figures.double_acks == 1
    assert report.figures.ran_after_ack == 1


def test_two_runs_of_one_attempt_are_a_double_handout():
    j = job()
    run(j, 1, "completed", worker="w1", at=1)
    run(j, 1, "completed", worker="w2", at=2)
    ack(j, 1, at=1)
    acked(j)

    report = check([j], [Fault("kill", T0, T0 + timedelta(seconds=5))])

    assert report.figures.double_handouts == 1 and not report.ok


def test_a_second_run_needs_a_fault_on_the_first_runs_worker_between_the_claims():
    j = job()
    run(j, 1, "completed", worker="w1")
    run(j, 2, "completed", worker="w2")
    ack(j, 2, worker="w2")
    acked(j)
    elsewhere = Fault("kill", T0, T0 + timedelta(seconds=5), frozenset({"w2"}))
    too_late = Fault("kill", T0 + timedelta(seconds=3), T0 + timedelta(seconds=5))
    on_w1 = Fault(
        "kill", T0 + timedelta(seconds=1.5), T0 + timedelta(seconds=1.5), frozenset({"w1"})
    )

    assert check([j]).figures.unexplained == 1
    assert check([j], [elsewhere]).figures.unexplained == 1
    assert check([j], [too_late]).figures.unexplained == 1
    explained = check([j], [on_w1])
    assert explained.ok and explained.figures.duplicate_causes == {"kill": 1}


def test_an_attempt_that_never_reached_a_handler_needs_a_fault():
    j = job()
    run(j, 2, "completed")
    ack(j, 2)
    acked(j)

    assert check([j]).figures.unexplained == 1
    assert check([j], [Fault("kill", T0, T0 + timedelta(seconds=1))]).ok


def test_dead_letters_need_a_reason_and_a_live_job_fails_a_drain():
    dead, live = job(), job()
    row = QueueMessage.objects.get(pk=dead)
    QueueMessage.objects.filter(pk=dead).delete()
    DeadLetter.objects.create(
        job_id=dead,
        queue=row.queue,
        payload={},
        attempts=2,
        max_attempts=row.max_attempts,
        backoff_base=1,
        lease=1,
        run_at=T0,
        enqueued_at=T0,
        died_at=T0,
        reason="max attempts exceeded",
    )

    report = check([dead, live])

    assert report.figures.dead == 1 and report.figures.live == 1
    assert any("at attempts 2/3" in p for p in report.problems)
    assert any("still live" in p for p in report.problems)
    assert check([live], drained=False).ok


def test_an_ack_record_lost_with_its_worker_is_tolerated_only_where_a_fault_struck_it():
    j = job()
    run(j, 1, "completed")
    acked(j)

    assert not check([j]).ok
    kill = Fault("kill", T0 + timedelta(seconds=2), T0 + timedelta(seconds=2), frozenset({"w1"}))
    tolerated = check([j], [kill])
    assert tolerated.ok and tolerated.figures.acks_unrecorded == 1


def test_an_expected_end_state_is_checked():
    j = job()
    run(j, 1, "completed")
    ack(j, 1)
    acked(j)

    assert not check([j], expect={j: "dead"}).ok
    assert check([j], expect={j: "acked"}).ok
