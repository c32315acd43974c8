"""The one loop shape (worker/service.py): the Loop around every service, its back-off, its
death, and the services whose tick decides more than one step (leader, claim, acker)."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from django.db import OperationalError

from django_alkqueue.clock import system_clock
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.worker.acker import IDLE_WAIT, AckService
from django_alkqueue.worker.claimer import Claimer, ClaimService, PausedQueues
from django_alkqueue.worker.inflight import InFlight
from django_alkqueue.worker.leader import Leadership
from django_alkqueue.worker.maintenance import LeaderService
from django_alkqueue.worker.service import Backoff, Loop
from tests.conftest import wait_until


class Ticker:
    """A service that counts its ticks and raises what `errors` holds, one per tick."""

    def __init__(self, name: str = "ticker", interval: float = 0.0, errors=()) -> None:
        self.name = name
        self.interval = interval
        self.errors = list(errors)
        self.ticks: list[datetime] = []

    def run_once(self, now: datetime) -> int:
        self.ticks.append(now)
        if self.errors:
            raise self.errors.pop(0)
        return len(self.ticks)


class Deaths(list[str]):
    def __call__(self, name: str) -> None:
        self.append(name)


def started(service: Ticker, **options) -> tuple[Loop, Deaths]:
    deaths = Deaths()
    loop = Loop(service, system_clock, deaths, refresh=None, **options)
    loop.start()
    return loop, deaths


# -- the back-off ----------------------------------------------------------------------------


def test_the_backoff_doubles_from_a_tenth_of_a_second_up_to_five_then_starts_again():
    backoff = Backoff()
    assert [backoff.next() for _ in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    backoff.reset()
    assert backoff.next() == 0.1


# -- the loop --------------------------------------------------------------------------------


def test_stopping_a_loop_cuts_its_wait_short():
    service = Ticker(interval=3600)
    loop, _ = started(service)
    wait_until(lambda: len(service.ticks) == 1)
    loop.stop()
    loop.join(2)
    assert not loop._thread.is_alive()


def test_a_wake_event_brings_the_next_tick_early():
    wake = threading.Event()
    service = Ticker(interval=3600)
    loop, _ = started(service, wake=wake)
    wait_until(lambda: len(service.ticks) == 1)
    wake.set()
    wait_until(lambda: len(service.ticks) == 2)
    loop.stop()
    loop.join(2)


def test_a_database_error_backs_off_and_the_loop_goes_on():
    service = Ticker(errors=[OperationalError("server closed the connection")])
    loop, deaths = started(service)
    wait_until(lambda: len(service.ticks) >= 3)
    loop.stop()
    loop.join(2)
    assert deaths == [] and not loop.died
    # The tick after the error came a back-off later, not at once.
    assert (service.ticks[1] - service.ticks[0]).total_seconds() >= 0.09


def test_any_other_error_ends_the_loop_and_reports_its_death_once(caplog):
    service = Ticker(name="alk-broken", errors=[TypeError("a bug")])
    loop, deaths = started(service)
    loop.join(5)
    assert deaths == ["alk-broken"] and loop.died
    assert len(service.ticks) == 1
    assert "alk-broken: the loop died; stopping the worker" in caplog.text
    assert "TypeError: a bug" in caplog.text


# -- the leader's services -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_leader_runs_each_service_when_its_own_interval_has_passed():
    often, seldom = Ticker("often", interval=0.0), Ticker("seldom", interval=3600)
    leader = LeaderService(Leadership("default", "w"), [often, seldom], stale_after=30)
    for _ in range(3):
        assert leader.run_once(system_clock()) is True
    assert (len(often.ticks), len(seldom.ticks)) == (3, 1)
    assert leader.interval == 0.0
    leader.leadership.release()


@pytest.mark.django_db(transaction=True)
def test_an_error_in_a_leader_service_escapes_the_leader_tick():
    leader = LeaderService(Leadership("default", "w"), [Ticker(errors=[KeyError("x")])], 30)
    with pytest.raises(KeyError):
        leader.run_once(system_clock())
    leader.leadership.release()


# -- the claim loop --------------------------------------------------------------------------


def claim_loop(queues, burst: bool, max_jobs: int | None = None) -> tuple[ClaimService, Claimer]:
    paused = PausedQueues("default", [q.name for q in queues], every=60.0)
    claimer = Claimer(queues, "w", InFlight(), lambda handles: None, 4, None, paused, max_jobs)
    return ClaimService(claimer, lambda: 0, burst, threading.Event()), claimer


@pytest.mark.django_db
def test_a_burst_claim_loop_is_done_once_nothing_is_due_and_nothing_is_held(q):
    loop, _ = claim_loop([q], burst=True)
    assert loop.run_once(system_clock()) == 0
    assert loop.done.is_set()


@pytest.mark.django_db
def test_a_burst_claim_loop_is_not_done_while_it_holds_jobs(q):
    q.enqueue_many(range(2))
    loop, _ = claim_loop([q], burst=True)
    assert loop.run_once(system_clock()) == 2
    assert loop.run_once(system_clock()) == 0
    assert not loop.done.is_set()


@pytest.mark.django_db
def test_a_claim_that_came_back_full_with_room_left_looks_again_at_once(q):
    q.enqueue_many(range(10))
    loop, claimer = claim_loop([q], burst=False, max_jobs=None)
    claimer.batch = 2  # claims of 2 into a capacity of 4: full, with room left
    loop.run_once(system_clock())
    assert loop.interval == 0.0


# -- the acker's window ----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_acker_waits_for_its_window_before_it_acks(q):
    q.enqueue(1)
    inflight = InFlight()
    acker = AckService("default", inflight, WorkerStats(), window=3600)
    assert acker.interval == IDLE_WAIT
    handle = q.claim_one("w")
    inflight.add(handle)
    acker.submit_all([handle], 0.0)
    assert acker.submitted.is_set()
    assert 3599 < acker.interval <= 3600
    assert acker.run_once(system_clock()) == 0  # the window is still open
    assert acker.flush() == 1  # the shutdown's flush does not wait for it
    assert acker.interval == IDLE_WAIT
