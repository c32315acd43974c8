"""The worker's periodic services, one tick at a time through run_once()."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

from django_alkqueue.clock import system_clock
from django_alkqueue.models import Consumer, DeadLetter, Worker
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.sql import dialect_for, dialect_name
from django_alkqueue.worker.consumer_table import sync_consumers
from django_alkqueue.worker.heartbeats import HeartbeatService
from django_alkqueue.worker.inflight import InFlight
from django_alkqueue.worker.leader import LEADER_LOCK_KEY, Leadership
from django_alkqueue.worker.maintenance import ReclaimService, SweepService
from django_alkqueue.worker.presence import PresenceService

pytestmark = pytest.mark.django_db


def test_reclaim_returns_lapsed_jobs_with_attempts_left_to_pending(q, clock):
    job = q.enqueue(1)
    q.claim_one("crashed")
    clock.advance(31)
    assert ReclaimService("default").run_once(clock()) == (1, 0)
    stored = q.get_job(job.id)
    assert (stored.state, stored.attempts, stored.claimed_by) == ("pending", 1, None)


def test_reclaim_dead_letters_lapsed_jobs_without_attempts_left(q, clock):
    job = q.enqueue(1, max_attempts=1)
    q.claim_one("crashed")
    clock.advance(31)
    assert ReclaimService("default").run_once(clock()) == (0, 1)
    dead = q.get_job(job.id)
    assert (dead.state, dead.last_error, dead.attempts) == ("dead", "max attempts exceeded", 1)


def test_reclaim_leaves_live_leases_alone(q, clock):
    job = q.enqueue(1)
    q.claim_one("alive")
    clock.advance(29)
    assert ReclaimService("default").run_once(clock()) == (0, 0)
    assert q.get_job(job.id).claimed_by == "alive"


def test_the_lapsed_attempt_stays_counted_after_a_reclaim(q, clock):
    job = q.enqueue(1)
    q.claim_one("crashed")
    clock.advance(31)
    ReclaimService("default").run_once(clock())
    assert q.claim_one("next").job.attempts == 2
    assert q.get_job(job.id).attempts == 2


def test_sweeper_moves_expired_jobs_of_every_queue(make_queue, clock):
    a = make_queue("a").enqueue(1, expires=5)
    b = make_queue("b").enqueue(1, expires=5)
    clock.advance(5)
    assert SweepService("default").run_once(clock()) == 2
    assert {d.job_id for d in DeadLetter.objects.all()} == {a.id, b.id}


def test_sweeper_deletes_dead_letters_past_their_stamped_retention(make_queue, clock):
    short = make_queue("short", retention=60)
    kept = make_queue("kept", retention=None)
    for q in (short, kept):
        q.enqueue(1)
        q.claim_one("w").fail()
    clock.advance(61)
    SweepService("default").run_once(clock())
    assert list(DeadLetter.objects.values_list("queue", flat=True)) == ["kept"]


def test_sweeper_prunes_workers_stale_for_a_day(clock):
    PresenceService("default", "old", ["q"], 1, WorkerStats(), 5).register(clock())
    clock.advance(days=1, seconds=1)
    PresenceService("default", "new", ["q"], 1, WorkerStats(), 5).register(clock())
    SweepService("default").run_once(clock())
    assert list(Worker.objects.values_list("worker_id", flat=True)) == ["new"]


def test_the_heartbeat_service_heartbeats_running_jobs_in_one_statement(
    make_queue, clock, django_assert_max_num_queries
):
    q = make_queue("slow", lease=30)
    q.enqueue_many([1, 2, 3])
    inflight = InFlight()
    for handle in q.claim("w", 3):
        inflight.add(handle)
    clock.advance(20)
    heartbeats = HeartbeatService(inflight, "default", 10)
    # PostgreSQL: one UPDATE. SQLite's own dialect: one UPDATE per job inside one
    # transaction. The ORM dialect: a locking read and one UPDATE for the lease they share.
    one = dialect_name(connections["default"]) == "postgresql"
    with django_assert_max_num_queries(1 if one else 5):
        extended = heartbeats.run_once(system_clock())
    assert len(extended) == 3
    clock.advance(20)  # 40 s after the claim: alive thanks to the heartbeat
    assert all(h.ack() for h in inflight.all())


def test_the_heartbeat_service_skips_jobs_held_by_an_atomic_transaction(q):
    q.enqueue(1)
    inflight = InFlight()
    handle = q.claim_one("w")
    inflight.add(handle)
    inflight.hold_in_transaction(handle)
    assert HeartbeatService(inflight, "default", 10).run_once(system_clock()) == set()


def test_the_heartbeat_service_reports_a_lost_lease(q, clock, caplog):
    job = q.enqueue(1)
    inflight = InFlight()
    inflight.add(q.claim_one("w"))
    q.cancel(job.id)
    assert HeartbeatService(inflight, "default", 10).run_once(system_clock()) == set()
    assert "heartbeat refused" in caplog.text


def test_presence_registers_refreshes_and_unregisters(clock):
    stats = WorkerStats()
    presence = PresenceService("default", "host:1", ["shop-emails"], 4, stats, 5)
    presence.register(clock())
    stats.record("shop-emails", "succeeded")
    stats.record("shop-emails", "dead")
    clock.advance(5)
    presence.run_once(clock())
    row = Worker.objects.get(worker_id="host:1")
    assert (row.queues, row.concurrency, row.jobs_processed, row.jobs_failed) == (
        ["shop-emails"], 4, 2, 1,
    )  # fmt: skip
    assert row.last_heartbeat_at == clock.now
    presence.unregister()
    assert not Worker.objects.exists()


def test_leadership_marks_exactly_one_worker_row(clock):
    for worker_id in ("a", "b"):
        PresenceService("default", worker_id, ["q"], 1, WorkerStats(), 5).register(clock())
    leader = Leadership("default", "a")
    assert leader.acquire(clock(), 30)
    assert list(Worker.objects.filter(is_leader=True).values_list("worker_id", flat=True)) == ["a"]
    leader.release()


@pytest.mark.postgres_only
def test_the_advisory_lock_admits_one_leader(transactional_db, clock):
    from tests.conftest import run_threads

    results: dict[str, bool] = {}
    first = Leadership("default", "first")
    assert first.acquire(clock(), 30)
    run_threads(1, lambda i: results.update(second=Leadership("default", "second").acquire(
        clock(), 30)))  # fmt: skip
    assert results == {"second": False}
    assert first.acquire(clock(), 30)  # holding it again does not stack the lock
    first.release()
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s "
            "AND pid = pg_backend_pid()",
            [LEADER_LOCK_KEY & 0xFFFFFFFF],
        )
        assert cursor.fetchone()[0] == 0


def test_sqlite_style_leadership_passes_on_when_the_leader_goes_stale(clock):
    if dialect_for(connections["default"]).supports_advisory_locks:
        pytest.skip("this database elects through a session lock")
    for worker_id in ("a", "b"):
        PresenceService("default", worker_id, ["q"], 1, WorkerStats(), 5).register(clock())
    assert Leadership("default", "a").acquire(clock(), 30)
    assert not Leadership("default", "b").acquire(clock(), 30)
    clock.advance(31)
    PresenceService("default", "b", ["q"], 1, WorkerStats(), 5).run_once(clock())
    assert Leadership("default", "b").acquire(clock(), 30)
    assert Worker.objects.get(is_leader=True).worker_id == "b"


def test_consumer_rows_are_written_at_worker_start():
    from django_alkqueue.consumers import registry

    sync_consumers([registry.get("shop-emails")], "default", takeover=False)
    row = Consumer.objects.get(queue="shop-emails")
    assert row.handler == "testproject.shop.consumers.send_email"
    assert (row.lease, row.max_attempts, row.retry_policy["backoff"]) == (30.0, 3, "constant")


def test_a_worker_refuses_a_queue_whose_row_names_another_handler():
    from django_alkqueue.consumers import registry

    Consumer.objects.create(
        queue="shop-emails", handler="elsewhere.handler", lease=1, max_attempts=1
    )
    with pytest.raises(CommandError, match=r"elsewhere\.handler.*send_email"):
        sync_consumers([registry.get("shop-emails")], "default", takeover=False)
    sync_consumers([registry.get("shop-emails")], "default", takeover=True)
    assert Consumer.objects.get(queue="shop-emails").handler.endswith("send_email")


def test_alk_worker_refuses_a_queue_without_a_consumer():
    with pytest.raises(CommandError, match="no @consumer or task backend for queue"):
        call_command("alk_worker", queue=["nobody-home"], burst=True)


def test_alk_worker_refuses_to_start_when_discovery_recorded_errors(monkeypatch):
    from django_alkqueue.consumers import registry

    monkeypatch.setattr(registry, "errors", ["queue 'x' has two consumers: a.f and b.g"])
    with pytest.raises(CommandError, match=r"a\.f and b\.g"):
        call_command("alk_worker", burst=True)


def test_paused_queues_are_skipped_by_the_claimer(make_queue):
    from django_alkqueue.worker.claimer import Claimer, PausedQueues

    emails, reports = make_queue("shop-emails"), make_queue("shop-reports")
    emails.enqueue(1)
    reports.enqueue(2)
    Consumer.objects.create(queue="shop-emails", handler="h", lease=30, max_attempts=5, paused=True)
    inflight = InFlight()
    dispatched = []
    paused = PausedQueues("default", ["shop-emails", "shop-reports"], 0)
    claimer = Claimer([emails, reports], "w", inflight, dispatched.extend, 4, None, paused, None)
    assert claimer.run_once() == 1
    assert [h.job.queue for h in dispatched] == ["shop-reports"]
    Consumer.objects.filter(queue="shop-emails").update(paused=False)
    assert claimer.run_once() == 1


def test_claimer_claims_no_more_than_the_free_capacity(make_queue):
    from django_alkqueue.worker.claimer import Claimer, PausedQueues

    q = make_queue("shop-emails")
    q.enqueue_many(range(10))
    inflight = InFlight()
    claimer = Claimer([q], "w", inflight, lambda h: None, 4, None,
                      PausedQueues("default", ["shop-emails"], 0), None)  # fmt: skip
    assert claimer.run_once() == 4
    assert claimer.run_once() == 0
    for handle in inflight.all()[:2]:
        inflight.handlers_done([handle])
    assert claimer.run_once() == 2


def test_the_heartbeat_service_ticks_within_a_third_of_the_shortest_lease_held(make_queue):
    q = make_queue("mixed", lease=60)
    q.enqueue(1)
    q.enqueue(2, priority=1)
    inflight = InFlight()
    heartbeats = HeartbeatService(inflight, "default", 20)
    for handle in q.claim("w", 2):
        inflight.add(handle)
    heartbeats.run_once(system_clock())
    assert heartbeats.interval == 20
    short = make_queue("mixed", lease=6)
    short.enqueue(3)
    inflight.add(short.claim_one("w"))
    heartbeats.run_once(system_clock())
    assert heartbeats.interval == 2


def test_claimer_waits_until_half_its_capacity_is_free(make_queue):
    from django_alkqueue.worker.claimer import Claimer, PausedQueues

    q = make_queue("shop-emails")
    q.enqueue_many(range(10))
    inflight = InFlight()
    claimer = Claimer([q], "w", inflight, lambda h: None, 4, None,
                      PausedQueues("default", ["shop-emails"], 0), None)  # fmt: skip
    assert claimer.run_once() == 4
    inflight.handlers_done([inflight.all()[0]])
    assert claimer.run_once() == 0  # one free slot of four: not worth a transaction yet
    inflight.handlers_done([inflight.all()[1]])
    assert claimer.run_once() == 2
