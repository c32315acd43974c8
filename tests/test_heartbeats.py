"""Heartbeats under load: what a heartbeat of many held jobs costs in round trips, that a
worker holding thousands of jobs keeps every lease when each round trip is slow (a loaded
server), and that a heartbeat skipping a row another transaction holds is no lost claim."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from django_alkqueue.models import QueueMessage
from django_alkqueue.sql.orm import OrmDialect
from django_alkqueue.sql.orm_rows import CHUNK
from django_alkqueue.worker.heartbeats import HeartbeatService
from django_alkqueue.worker.inflight import InFlight
from tests.clocks import FakeClock
from tests.conftest import run_threads, wait_until

#: More jobs than one chunk of ids holds, so a heartbeat crosses chunk boundaries.
HELD = 3 * CHUNK
#: What each round trip to the database costs the worker's clock in the slow-server test.
ROUND_TRIP = 0.01


def _claim_all(q: Any, count: int) -> list[Any]:
    q.enqueue_many(list(range(count)))
    handles: list[Any] = []
    while len(handles) < count:
        handles += q.claim("holder", count - len(handles))
    return handles


def _slow_round_trips(clock: FakeClock) -> Callable[..., Any]:
    """A connection wrapper: every statement moves `clock` on by ROUND_TRIP."""

    def slow(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        clock.advance(ROUND_TRIP)
        return execute(sql, params, many, context)

    return slow


@pytest.mark.django_db
def test_the_orm_dialects_heartbeat_takes_a_few_statements_per_chunk_not_one_per_job(
    make_queue, clock, django_assert_max_num_queries
):
    handles = _claim_all(make_queue("held", lease=10), HELD)
    expires = clock() + timedelta(seconds=10)
    chunks = -(-HELD // CHUNK)
    # Per chunk one locking read and one UPDATE for the lease length they share; then the
    # transaction's own statements (and SQLite's write lock first).
    with django_assert_max_num_queries(2 * chunks + 3):
        extended = OrmDialect().heartbeat(
            connection, [(h.claim, expires) for h in handles], clock()
        )
    assert set(extended) == {h.claim for h in handles}


@pytest.mark.row_locks
@pytest.mark.django_db(transaction=True)
def test_a_worker_holding_many_jobs_on_a_slow_connection_keeps_every_lease(make_queue, clock):
    q = make_queue("held", lease=10)
    inflight = InFlight()
    inflight.add_all(_claim_all(q, HELD))
    clock.advance(q.lease / 3)  # the heartbeat service's tick: a third of the lease
    with connection.execute_wrapper(_slow_round_trips(clock)):
        HeartbeatService(inflight, "default").run_once(clock())
    taken: list[int] = []
    # Another worker, on a connection of its own, claims right after the heartbeat.
    run_threads(1, lambda _: taken.append(len(q.claim("other", HELD))))
    assert taken == [0]


@pytest.mark.row_locks
@pytest.mark.django_db(transaction=True)
def test_a_running_job_whose_row_another_transaction_holds_is_not_taken_for_lost(q, caplog):
    q.enqueue(1)
    handle = q.claim_one("w")
    inflight = InFlight()
    inflight.add(handle)
    locked, done = threading.Event(), threading.Event()

    def hold_the_row(_: int) -> None:  # as the admin's "change priority" does, for a moment
        with transaction.atomic():
            QueueMessage.objects.select_for_update().filter(pk=handle.job.id).update(priority=5)
            locked.set()
            done.wait(10)

    holder = threading.Thread(target=run_threads, args=(1, hold_the_row))
    holder.start()
    wait_until(locked.is_set, what="the other transaction holds the row")
    try:
        extended = HeartbeatService(inflight, "default").run_once(q.clock())
    finally:
        done.set()
        holder.join()
    assert extended == set()  # skipped, not waited for: the next tick heartbeats it
    assert not inflight.run_of(handle).cancelled
    assert "heartbeat refused" not in caplog.text
