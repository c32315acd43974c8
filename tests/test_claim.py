"""Claim: the extent guard, handout order, reclaims, exactly-once handout, the claim plan."""

from __future__ import annotations

import multiprocessing
import uuid
from datetime import timedelta

import pytest
from django.db import connection, connections

from django_alkqueue import InvalidName, InvalidOption, queue
from django_alkqueue.models import QueueMessage
from django_alkqueue.signals import job_dead_lettered
from tests.conftest import empty_statistics_with_pages, fill_ten_queues, run_threads

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("n", [-1, 0])
def test_claim_with_non_positive_n_returns_empty_and_claims_nothing(q, n):
    q.enqueue_many([1, 2, 3])
    assert q.claim("w", n) == []
    assert QueueMessage.objects.claimed().count() == 0


def test_claim_hands_out_at_most_n(q):
    q.enqueue_many(range(10))
    assert len(q.claim("w", 4)) == 4
    assert len(q.claim("w", 100)) == 6
    assert q.claim("w", 100) == []


def test_a_claim_of_a_thousand_hands_out_each_job_once_stamped_with_its_claim(q):
    # More rows than one stamp statement takes on SQLite (its claim stamps them in slices).
    ids = [job.id for job in q.enqueue_many(range(1000))]
    handles = q.claim("w", 1000)
    assert [h.job.id for h in handles] == ids
    rows = QueueMessage.objects.filter(id__in=ids)
    assert {(row.id, row.claim_token) for row in rows} == {tuple(h.claim) for h in handles}
    assert all(h.lease_expires_at == handles[0].lease_expires_at for h in handles)
    assert all(row.attempts == 1 and row.claimed_by == "w" for row in rows)


def test_claim_one_returns_none_on_an_empty_queue(q):
    assert q.claim_one("w") is None


@pytest.mark.parametrize("worker_id", ["", None, 7, "x" * 256, "a\x00b"])
def test_claim_refuses_a_bad_worker_id(q, worker_id):
    q.enqueue(1)
    with pytest.raises(InvalidName):
        q.claim(worker_id)
    assert QueueMessage.objects.claimed().count() == 0


def test_claim_refuses_a_non_integer_n(q):
    with pytest.raises(InvalidOption):
        q.claim("w", 1.5)


def test_claim_order_is_priority_then_run_at_then_id(q, clock):
    low = q.enqueue("low", priority=-5)
    late = q.enqueue("late", delay=0)
    clock.advance(-10)
    early = q.enqueue("early")
    clock.advance(10)
    high = q.enqueue("high", priority=50)
    same_time_a = q.enqueue("a")
    same_time_b = q.enqueue("b")
    order = [h.job.id for h in q.claim("w", 10)]
    assert order == [high.id, early.id, late.id, same_time_a.id, same_time_b.id, low.id]


def test_scheduled_jobs_are_not_handed_out_before_run_at(q, clock):
    job = q.enqueue(1, delay=60)
    assert q.claim("w") == []
    clock.advance(60)
    assert [h.job.id for h in q.claim("w")] == [job.id]


def test_expired_jobs_are_not_handed_out(q, clock):
    q.enqueue(1, expires=10)
    clock.advance(10)
    assert q.claim("w") == []


def test_claim_stamps_attempt_worker_token_and_lease(make_queue, clock):
    q = make_queue("stamps", lease=45)
    q.enqueue(1)
    [handle] = q.claim("worker-9")
    stored = QueueMessage.objects.get(pk=handle.job.id)
    assert stored.attempts == 1
    assert stored.claimed_by == "worker-9"
    assert stored.claimed_at == clock.now
    assert stored.lease_expires_at == clock.now + timedelta(seconds=45)
    assert stored.claim_token == handle.token
    assert handle.job.lease_expires_at == clock.now + timedelta(seconds=45)


def test_the_job_a_claim_hands_out_is_the_job_read_back_from_the_table(make_queue, clock):
    q = make_queue("read-back", lease=45, retention=600)
    q.enqueue({"to": "a@example.com"}, priority=3, unique_key="k1", expires=timedelta(hours=1))
    [handle] = q.claim("worker-9")

    assert handle.job == q.get_job(handle.job.id)
    assert handle.job.state == "claimed"


def test_a_dead_letter_announced_by_a_claim_is_the_one_stored(q, clock):
    job = q.enqueue({"n": 1}, max_attempts=1)
    q.claim_one("first")
    clock.advance(31)
    announced = []

    def receiver(sender, job, **kwargs):
        announced.append(job)

    job_dead_lettered.connect(receiver)
    try:
        assert q.claim("second") == []
    finally:
        job_dead_lettered.disconnect(receiver)

    assert announced == [q.get_job(job.id)]
    assert announced[0].claimed_by == "first"


def test_each_claim_gets_a_fresh_token(q, clock):
    q.enqueue(1)
    first = q.claim_one("a")
    clock.advance(31)
    second = q.claim_one("b")
    assert first.token != second.token


def test_claims_are_per_queue(make_queue):
    make_queue("a").enqueue(1)
    assert make_queue("b").claim("w") == []


def test_a_lapsed_lease_is_claimable_again_and_consumes_an_attempt(q, clock):
    job = q.enqueue(1)
    q.claim_one("first")
    assert q.claim("second") == []
    clock.advance(30)
    [again] = q.claim("second")
    assert again.job.id == job.id
    assert again.job.attempts == 2
    assert again.job.claimed_by == "second"


def test_a_lapsed_job_without_attempts_left_is_dead_lettered_by_the_claim(q, clock):
    job = q.enqueue(1, max_attempts=1)
    q.claim_one("first")
    clock.advance(31)
    assert q.claim("second") == []
    dead = q.get_job(job.id)
    assert dead.state == "dead"
    assert dead.reason == "max attempts exceeded"
    assert dead.last_error == "max attempts exceeded"
    assert dead.attempts == 1


def test_a_lapsed_lease_set_in_the_past_through_the_orm_is_reclaimed(q):
    job = q.enqueue(1)
    q.claim_one("first")
    QueueMessage.objects.filter(pk=job.id).update(lease_expires_at=q.clock() - timedelta(1))
    assert [h.job.id for h in q.claim("second")] == [job.id]


def test_two_workers_racing_for_one_row_get_it_once(transactional_db):
    queue("race").enqueue({"only": 1})
    got: list[int] = []
    run_threads(2, lambda i: got.extend(h.job.id for h in queue("race").claim(f"w{i}", 1)))
    assert len(got) == 1


def _drain(name: str, worker: str, batch: int) -> list[int]:
    q = queue(name)
    seen: list[int] = []
    while handles := q.claim(worker, batch):
        for handle in handles:
            seen.append(handle.job.id)
            assert handle.ack()
    return seen


def test_eight_threads_draining_2000_jobs_get_each_exactly_once(transactional_db):
    ids = [j.id for j in queue("drain").enqueue_many([{"i": i} for i in range(2000)])]
    results: list[list[int]] = [[] for _ in range(8)]

    def work(i: int) -> None:
        results[i] = _drain("drain", f"thread-{i}", 7)

    run_threads(8, work)
    handed = [job_id for result in results for job_id in result]
    assert sorted(handed) == sorted(ids)
    assert QueueMessage.objects.count() == 0


def _drain_in_process(name: str, worker: str, out: multiprocessing.Queue) -> None:
    connections.close_all()
    out.put(_drain(name, worker, 11))
    connections.close_all()


@pytest.mark.postgres_only
def test_four_processes_draining_2000_jobs_get_each_exactly_once(transactional_db):
    ids = [j.id for j in queue("procs").enqueue_many([{"i": i} for i in range(2000)])]
    connections.close_all()
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    procs = [
        context.Process(target=_drain_in_process, args=("procs", f"proc-{i}", out))
        for i in range(4)
    ]
    for p in procs:
        p.start()
    handed = [job_id for _ in procs for job_id in out.get(timeout=120)]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert sorted(handed) == sorted(ids)
    assert QueueMessage.objects.count() == 0


@pytest.mark.postgres_only
def test_claim_query_uses_the_partial_pending_index_on_100k_rows(transactional_db):
    from django_alkqueue.sql.postgresql.statements import CLAIM, claim_params

    with connection.cursor() as cursor:
        fill_ten_queues(cursor)
        params = claim_params("q3", "w", 10, queue("q3").clock(), uuid.uuid4())
        cursor.execute("EXPLAIN " + CLAIM, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "alkqueue_pending_idx" in plan, plan
    assert "alkqueue_lease_idx" in plan, plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.postgres_only
def test_the_claim_finds_its_rows_by_key_when_the_statistics_were_taken_on_an_empty_table(
    frozen_statistics,
):
    """A queue table is often empty when it is analyzed or vacuumed; the claim's generic
    plan, pinned to nested loops (sql/postgresql/session.py), must still stamp the chosen
    rows by their primary key rather than walk the table once per claim."""
    from django_alkqueue.sql.postgresql.session import PINNED_PLAN_SETTINGS
    from django_alkqueue.sql.postgresql.statements import CLAIM, claim_params

    with connection.cursor() as cursor:
        empty_statistics_with_pages(cursor)
        fill_ten_queues(cursor, analyse=False)
        for name, value in PINNED_PLAN_SETTINGS.items():
            cursor.execute(f"SET {name} = {value}")
        params = claim_params("q3", "w", 10, queue("q3").clock(), uuid.uuid4())
        cursor.execute("EXPLAIN " + CLAIM, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET ALL")
    scans = [line for line in plan.splitlines() if "alkqueue_message_pkey" in line]
    assert scans, plan
    for at, line in enumerate(plan.splitlines()):
        if "alkqueue_message_pkey" in line:
            assert "Index Cond: (id = ANY" in plan.splitlines()[at + 1], plan


def test_a_lapsed_higher_priority_job_is_handed_out_first(q, clock):
    q.enqueue("low", priority=0)
    high = q.enqueue("high", priority=5)
    by_id = {h.job.id: h for h in q.claim("w1", 2)}
    assert by_id[high.id].heartbeat(60)  # high lapses after low
    clock.advance(61)
    assert [h.job.id for h in q.claim("w2", 1)] == [high.id]


def test_an_exhausted_lapsed_job_does_not_hide_a_reclaimable_one(q, clock):
    spent = q.enqueue("spent", max_attempts=1)
    again = q.enqueue("again", max_attempts=3)
    handles = {h.job.id: h for h in q.claim("w1", 2)}
    assert handles[again.id].heartbeat(60)
    clock.advance(61)
    assert [h.job.id for h in q.claim("w2", 1)] == [again.id]
    assert q.get_job(spent.id).state == "dead"


def test_on_sqlite_each_half_of_the_claim_reads_its_index_in_handout_order(db):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's claim statements")
    from django_alkqueue.sql.sqlite import _DUE, _LAPSED

    now = "2026-01-01 00:00:00"
    plans = {}
    with connection.cursor() as cursor:
        for name, sql in (("due", _DUE), ("lapsed", _LAPSED)):
            cursor.execute("EXPLAIN QUERY PLAN " + sql, ["q", now, now, 10])
            plans[name] = "\n".join(str(row[-1]) for row in cursor.fetchall())
    assert "alkqueue_pending_idx" in plans["due"], plans
    # Read in index order and stopped after n: no sort of the queue's whole pending range.
    assert "TEMP B-TREE" not in plans["due"], plans
    assert "alkqueue_lease_idx" in plans["lapsed"], plans
