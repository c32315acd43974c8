"""Dead letters, requeue, sweep_expired, cancel, ack_batch, purge and stats."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction

from django_alkqueue import InvalidOption, QueueStats
from django_alkqueue.jobs import Job
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.signals import job_dead_lettered

pytestmark = pytest.mark.django_db


def _exhaust(q, **options):
    job = q.enqueue({"k": 1}, **options)
    for _ in range(job.max_attempts):
        handle = q.claim_one("w")
        assert handle.retry(delay=0)
    return job


def test_exhausting_attempts_through_retry_none_gives_max_attempts_exceeded(q):
    job = _exhaust(q, max_attempts=3)
    dead = q.get_job(job.id)
    assert dead.state == "dead"
    assert dead.reason == "max attempts exceeded"
    assert dead.last_error == "max attempts exceeded"
    assert dead.attempts == 3


def test_the_last_retry_error_is_kept_verbatim_on_the_dead_letter(q):
    job = q.enqueue(1, max_attempts=1)
    q.claim_one("w").retry("SMTPException: 451 try later\nTraceback ...")
    dead = q.get_job(job.id)
    assert dead.last_error == "SMTPException: 451 try later\nTraceback ..."
    assert dead.reason == "max attempts exceeded"


def test_fail_none_gives_failed(q, clock):
    job = q.enqueue(1)
    assert q.claim_one("w").fail() is True
    dead = q.get_job(job.id)
    assert (dead.state, dead.reason, dead.last_error) == ("dead", "failed", "failed")
    assert dead.died_at == clock.now


def test_fail_keeps_the_callers_string_verbatim(q):
    job = q.enqueue(1)
    q.claim_one("w").fail("  card declined: insufficient funds \n")
    assert q.get_job(job.id).last_error == "  card declined: insufficient funds \n"


def test_error_text_with_nul_is_stored_not_refused(q):
    job = q.enqueue(1)
    assert q.claim_one("w").fail("bad\x00byte")
    assert q.get_job(job.id).last_error == "bad\\x00byte"


def test_dead_letter_keeps_the_job(q):
    job = q.enqueue({"to": "x"}, priority=9, max_attempts=2)
    q.claim_one("w").fail("nope")
    row = DeadLetter.objects.get(job_id=job.id)
    assert (row.queue, row.payload, row.priority, row.max_attempts, row.attempts) == (
        "shop-emails", {"to": "x"}, 9, 2, 1,
    )  # fmt: skip
    assert row.enqueued_at == job.enqueued_at
    assert not QueueMessage.objects.filter(pk=job.id).exists()


def test_job_dead_lettered_fires_once_per_dead_job(q):
    seen: list[Job] = []

    def receiver(sender, job, **kwargs):
        seen.append(job)

    job_dead_lettered.connect(receiver)
    try:
        a = q.enqueue(1)
        b = q.enqueue(2, max_attempts=1)
        q.claim_one("w").fail()
        q.claim_one("w").retry()
    finally:
        job_dead_lettered.disconnect(receiver)
    assert [(j.id, j.state) for j in seen] == [(a.id, "dead"), (b.id, "dead")]


def test_requeue_brings_a_dead_letter_back_with_attempts_reset(q, clock):
    job = q.enqueue({"p": 1}, priority=3, max_attempts=2)
    q.claim_one("w").fail("x")
    clock.advance(100)
    again = q.requeue(job.id)
    assert again.id == job.id
    assert (again.state, again.attempts, again.payload) == ("pending", 0, {"p": 1})
    assert (again.priority, again.max_attempts) == (3, 2)
    assert again.run_at == clock.now
    assert not DeadLetter.objects.exists()
    assert q.claim_one("w").job.id == job.id


@pytest.mark.django_db(transaction=True)
def test_requeue_returns_the_job_even_when_a_worker_finishes_it_as_soon_as_it_commits(q):
    """The live job is read inside the requeue's transaction: a worker that claims and acks
    it between the commit and a later read would have left requeue() saying None."""
    job = q.enqueue({"p": 1})
    q.claim_one("w").fail("x")
    live = QueueMessage.objects.filter(pk=job.id)

    def finish_at_commit(execute, sql, params, many, context):
        if "INSERT" in sql.upper() and QueueMessage._meta.db_table in sql:
            transaction.on_commit(live.delete)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(finish_at_commit):
        again = q.requeue(job.id)

    assert again is not None and again.id == job.id
    assert not live.exists() and not DeadLetter.objects.exists()


def test_requeue_of_an_unknown_id_returns_none(q):
    assert q.requeue(123456) is None


def test_requeue_twice_gives_one_live_job(q):
    job = q.enqueue(1)
    q.claim_one("w").fail()
    assert q.requeue(job.id) is not None
    assert q.requeue(job.id) is None
    assert QueueMessage.objects.count() == 1


def test_sweep_moves_expired_jobs_in_both_states_and_returns_the_count(q, clock):
    pending = q.enqueue(1, expires=10)
    claimed = q.enqueue(2, expires=10)
    q.claim("w", 1)
    keeps = q.enqueue(3, expires=60)
    forever = q.enqueue(4)
    clock.advance(10)
    assert q.get_job(claimed.id).state == "claimed" or q.get_job(pending.id).state == "claimed"
    assert q.sweep_expired() == 2
    for job in (pending, claimed):
        dead = q.get_job(job.id)
        assert (dead.state, dead.reason, dead.last_error) == ("dead", "expired", "expired")
    assert q.get_job(keeps.id).state == "pending"
    assert q.get_job(forever.id).state == "pending"


def test_the_claimer_of_an_expired_job_cannot_ack_it_after_the_sweep(q, clock):
    q.enqueue(1, expires=5)
    handle = q.claim_one("w")
    clock.advance(5)
    assert q.sweep_expired() == 1
    assert handle.ack() is False


def test_sweep_deletes_dead_letters_older_than_the_retention(make_queue, clock):
    q = make_queue("kept", retention=timedelta(days=1))
    old = q.enqueue(1)
    q.claim_one("w").fail()
    clock.advance(hours=23)
    young = q.enqueue(2)
    q.claim_one("w").fail()
    clock.advance(hours=2)
    assert q.sweep_expired() == 0
    assert q.get_job(old.id) is None
    assert q.get_job(young.id).state == "dead"


def test_retention_none_keeps_dead_letters_forever(make_queue, clock):
    q = make_queue("forever", retention=None)
    job = q.enqueue(1)
    q.claim_one("w").fail()
    clock.advance(days=3650)
    q.sweep_expired()
    assert q.get_job(job.id).state == "dead"


def test_sweep_leaves_other_queues_alone(make_queue, clock):
    other = make_queue("other")
    job = other.enqueue(1, expires=1)
    clock.advance(5)
    assert make_queue("mine").sweep_expired() == 0
    assert other.get_job(job.id).state == "pending"


def test_cancel_removes_a_live_job_in_any_state(q, clock):
    pending = q.enqueue(1)
    scheduled = q.enqueue(2, delay=60)
    claimed = q.enqueue(3)
    q.claim("w", 1)
    assert q.get_job(pending.id).state == "claimed"  # oldest first
    for job in (pending, scheduled, claimed):
        assert q.cancel(job.id) is True
        assert q.get_job(job.id) is None
    assert q.cancel(pending.id) is False


def test_cancel_does_not_touch_dead_letters(q):
    job = q.enqueue(1)
    q.claim_one("w").fail()
    assert q.cancel(job.id) is False
    assert q.get_job(job.id).state == "dead"


def test_ack_batch_acks_claims_of_several_workers_and_counts_them(q, clock):
    jobs = q.enqueue_many(range(5))
    q.claim("a", 2)
    q.claim("b", 2)
    unclaimed = jobs[4]
    ids = [j.id for j in jobs]
    assert q.ack_batch(ids) == 4
    assert [j.id for j in QueueMessage.objects.all()] == [unclaimed.id]


def test_ack_batch_skips_lapsed_leases(q, clock):
    job = q.enqueue(1)
    q.claim_one("w")
    clock.advance(31)
    assert q.ack_batch([job.id]) == 0


def test_ack_batch_of_nothing_is_zero(q):
    assert q.ack_batch([]) == 0


def test_purge_defaults_to_pending_and_scheduled(q):
    q.enqueue(1)
    q.enqueue(2, delay=60)
    q.enqueue(3)
    q.claim("w", 1)
    assert q.purge() == 2
    assert q.stats().claimed == 1


def test_purge_dead_clears_dead_letters(q):
    q.enqueue(1)
    q.claim_one("w").fail()
    assert q.purge(states=["dead"]) == 1
    assert q.stats().dead == 0


def test_purge_refuses_an_unknown_state(q):
    with pytest.raises(InvalidOption):
        q.purge(states=["running"])


def test_stats_and_depths_count_each_state(q, clock):
    q.enqueue_many([1, 2, 3])
    clock.advance(-40)
    q.enqueue("oldest")
    clock.advance(40)
    q.enqueue(5, delay=60)
    q.claim("w", 1)
    q.enqueue(6)
    q.claim_one("w").fail()
    stats = q.stats()
    assert stats == QueueStats(
        pending=3, scheduled=1, claimed=1, dead=1, oldest_pending_age=stats.oldest_pending_age
    )
    assert stats.oldest_pending_age == 0.0  # the oldest (40 s) was claimed first
    assert q.depth() == 5
    assert q.depth_pending() == 3


def test_oldest_pending_age_is_measured_from_run_at(q, clock):
    q.enqueue(1)
    clock.advance(12.5)
    assert q.stats().oldest_pending_age == 12.5


def test_stats_of_an_empty_queue(q):
    assert q.stats() == QueueStats(0, 0, 0, 0, 0.0)


def test_requeue_gives_the_job_its_lifetime_again(q, clock):
    job = q.enqueue(1, expires=timedelta(minutes=10))
    q.claim_one("w").fail()
    clock.advance(hours=1)
    assert q.requeue(job.id).expires_at == clock.now + timedelta(minutes=10)


def test_a_requeued_job_keeps_its_first_enqueued_at_and_says_when_it_was_requeued(q, clock):
    job = q.enqueue(1)
    q.claim_one("w").fail()
    clock.advance(hours=1)
    requeued = q.requeue(job.id)
    assert (requeued.enqueued_at, requeued.requeued_at) == (job.enqueued_at, clock.now)
    assert q.get_job(job.id).requeued_at == clock.now


def test_a_job_never_requeued_has_no_requeued_at(q):
    job = q.enqueue(1)
    assert (job.requeued_at, q.get_job(job.id).requeued_at) == (None, None)


def test_a_claim_hands_out_the_requeue_time(q, clock):
    job = q.enqueue(1)
    q.claim_one("w").fail()
    clock.advance(60)
    q.requeue(job.id)
    handle = q.claim_one("w")
    assert (handle.job.enqueued_at, handle.job.requeued_at) == (job.enqueued_at, clock.now)


def test_the_dead_letter_of_a_requeued_job_keeps_its_requeue_time(q, clock):
    job = q.enqueue(1)
    q.claim_one("w").fail()
    clock.advance(60)
    q.requeue(job.id)
    requeued_at = clock.now
    clock.advance(60)
    q.claim_one("w").fail()
    dead = q.get_job(job.id)
    assert (dead.state, dead.enqueued_at, dead.requeued_at) == (
        "dead", job.enqueued_at, requeued_at,
    )  # fmt: skip


def test_a_second_requeue_gives_the_job_its_first_lifetime_again(q, clock):
    job = q.enqueue(1, expires=timedelta(minutes=10))
    q.claim_one("w").fail()
    clock.advance(hours=1)
    q.requeue(job.id)
    q.claim_one("w").fail()
    clock.advance(hours=1)
    assert q.requeue(job.id).expires_at == clock.now + timedelta(minutes=10)
