"""JobHandle: ack, retry, fail and heartbeat under the one validity predicate."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_alkqueue import InvalidOption
from django_alkqueue.models import QueueMessage
from django_alkqueue.queues import ack_handles, heartbeat_handles

pytestmark = pytest.mark.django_db

OPERATIONS = {
    "ack": lambda h: h.ack(),
    "retry": lambda h: h.retry("boom"),
    "fail": lambda h: h.fail("boom"),
    "heartbeat": lambda h: h.heartbeat(),
}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_operation_is_refused_after_the_lease_lapses(q, clock, operation):
    job = q.enqueue(1)
    handle = q.claim_one("w")
    clock.advance(30)  # lease_expires_at == now: lapsed
    assert OPERATIONS[operation](handle) is False
    stored = QueueMessage.objects.get(pk=job.id)
    assert stored.claim_token == handle.token
    assert stored.last_error is None


@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_operation_is_refused_after_a_cancel(q, operation):
    job = q.enqueue(1)
    handle = q.claim_one("w")
    assert q.cancel(job.id)
    assert OPERATIONS[operation](handle) is False
    assert q.get_job(job.id) is None


@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_operation_is_refused_once_another_worker_reclaimed_the_job(q, clock, operation):
    job = q.enqueue(1)
    stale = q.claim_one("stale")
    clock.advance(31)
    fresh = q.claim_one("fresh")
    assert OPERATIONS[operation](stale) is False
    assert q.get_job(job.id).claimed_by == "fresh"
    assert fresh.ack() is True


@pytest.mark.parametrize("first", ["ack", "retry", "fail"])
@pytest.mark.parametrize("second", list(OPERATIONS))
def test_a_finished_handle_refuses_everything_after(q, first, second):
    q.enqueue(1)
    handle = q.claim_one("w")
    assert OPERATIONS[first](handle) is True
    assert OPERATIONS[second](handle) is False


def test_an_ack_by_the_original_claimer_loses_to_a_reclaim(q, clock):
    job = q.enqueue(1)
    original = q.claim_one("original")
    clock.advance(31)
    reclaimer = q.claim_one("reclaimer")
    assert reclaimer.job.attempts == 2
    assert original.ack() is False
    assert q.get_job(job.id).state == "claimed"
    assert reclaimer.ack() is True
    assert q.get_job(job.id) is None


def test_heartbeat_resets_the_lease_to_now_plus_the_job_lease(make_queue, clock):
    q = make_queue("hb", lease=30)
    job = q.enqueue(1)
    handle = q.claim_one("w")
    clock.advance(25)
    assert handle.heartbeat() is True
    assert q.get_job(job.id).lease_expires_at == clock.now + timedelta(seconds=30)
    clock.advance(25)  # 50 s after the claim: alive only thanks to the heartbeat
    assert handle.ack() is True


def test_heartbeat_with_extend_is_an_absolute_reset_not_an_addition(q, clock):
    job = q.enqueue(1)
    handle = q.claim_one("w")
    assert handle.heartbeat(extend=300)
    assert handle.heartbeat(extend=timedelta(seconds=10))
    assert q.get_job(job.id).lease_expires_at == clock.now + timedelta(seconds=10)


def test_heartbeat_is_repeatable(q, clock):
    q.enqueue(1)
    handle = q.claim_one("w")
    for _ in range(5):
        clock.advance(20)
        assert handle.heartbeat() is True
    assert handle.ack() is True


def test_heartbeat_refuses_a_bad_extend(q):
    q.enqueue(1)
    handle = q.claim_one("w")
    with pytest.raises(InvalidOption):
        handle.heartbeat(extend=-1)


def test_retry_without_delay_follows_the_backoff_curve(make_queue, clock):
    q = make_queue("curve", backoff_base=10)
    job = q.enqueue(1)
    q.claim_one("w").retry("first failure")
    stored = q.get_job(job.id)
    assert stored.state == "scheduled"
    assert stored.last_error == "first failure"
    assert stored.attempts == 1
    assert clock.now + timedelta(seconds=5) <= stored.run_at <= clock.now + timedelta(seconds=10)


def test_retry_with_an_explicit_delay_is_honoured(q, clock):
    job = q.enqueue(1)
    assert q.claim_one("w").retry(delay=timedelta(minutes=7)) is True
    assert q.get_job(job.id).run_at == clock.now + timedelta(minutes=7)
    assert q.claim("w") == []
    clock.advance(minutes=7)
    assert q.claim_one("w").job.attempts == 2


def test_retry_with_zero_delay_is_due_at_once(q):
    job = q.enqueue(1)
    q.claim_one("w").retry(delay=0)
    assert q.claim_one("w").job.id == job.id


def test_release_returns_the_job_and_refunds_the_attempt(q):
    job = q.enqueue(1)
    handle = q.claim_one("w")
    assert handle.release() is True
    stored = q.get_job(job.id)
    assert (stored.state, stored.attempts, stored.claimed_by) == ("pending", 0, None)


def test_each_job_of_one_claim_is_settled_by_its_own_handle_alone(q):
    # The jobs of one claim may share its token (PostgreSQL): the job id fences each.
    first, second, third = (q.enqueue(n).id for n in range(3))
    acked, retried, held = q.claim("w", 3)

    assert acked.ack() is True
    assert retried.retry("again", delay=timedelta(0)) is True

    assert q.get_job(first) is None
    assert (q.get_job(second).state, q.get_job(second).last_error) == ("pending", "again")
    assert q.get_job(third).state == "claimed"
    assert held.heartbeat() is True
    assert held.ack() is True


def test_a_batch_ack_holding_the_old_and_the_new_claim_of_a_job_acks_only_the_new(q, clock):
    # One worker can hold both: its ack waited (a locked table) until the lease lapsed, and
    # its own claimer took the job again.
    job = q.enqueue(1)
    old = q.claim_one("w")
    clock.advance(31)
    new = q.claim_one("w")
    assert ack_handles([old, new], q.using) == {new.claim}
    assert new.ack() is False  # already acked
    assert old.ack() is False
    assert q.get_job(job.id) is None


def test_a_batch_heartbeat_of_the_old_and_the_new_claim_of_a_job_extends_only_the_new(q, clock):
    q.enqueue(1)
    old = q.claim_one("w")
    clock.advance(31)
    new = q.claim_one("w")
    lapsed_at = old.lease_expires_at
    clock.advance(10)
    assert heartbeat_handles([old, new], q.using) == {new.claim}
    assert old.lease_expires_at == lapsed_at
    assert new.lease_expires_at == clock.now + timedelta(seconds=30)


@pytest.mark.parametrize("extend", [1e-9, timedelta(microseconds=0.4)])
def test_heartbeat_refuses_an_extension_too_small_to_store(q, extend):
    handle = q.enqueue({}) and q.claim_one("w")
    with pytest.raises(InvalidOption, match="at least 1 microsecond"):
        handle.heartbeat(extend)
    assert handle.ack()


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_an_error_whose_str_raises_still_dead_letters_the_job(q):
    job = q.enqueue({})
    assert q.claim_one("w").fail(Unprintable())
    assert q.get_job(job.id).last_error == "<Unprintable object: str() raised>"


def test_purge_takes_one_state_as_a_plain_string(q):
    q.enqueue({})
    assert q.purge("pending") == 1


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_handle_the_worker_acked_refuses_everything_after(q, operation):
    # An atomic consumer's ack runs in the handler's transaction, not through the handle:
    # the worker says so with the public settled_by_worker(), and the row is not touched again.
    job = q.enqueue(1)
    handle = q.claim_one("w")
    handle.settled_by_worker()
    assert OPERATIONS[operation](handle) is False
    assert QueueMessage.objects.get(pk=job.id).claim_token == handle.token
