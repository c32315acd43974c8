"""Claim ahead (issue 39, "Fast by default"): without --batch a worker claims, beyond its free
threads, the jobs it will start within a short horizon at the pace it observes."""

from __future__ import annotations

import pytest

from django_alkqueue.queues import MAX_CLAIM
from django_alkqueue.worker.claim_ahead import HORIZON, ClaimAhead, ahead_of
from django_alkqueue.worker.claimer import Claimer, PausedQueues
from django_alkqueue.worker.inflight import InFlight


def fed(estimate: ClaimAhead, *steps: tuple[int, float, float]) -> ClaimAhead:
    """Observe running totals (calls, handler seconds) at each time, from zero at time 0."""
    estimate.observe(0, 0.0, 0.0)
    for calls, seconds, now in steps:
        estimate.observe(calls, seconds, now)
    return estimate


def test_before_it_has_seen_a_handler_finish_it_claims_nothing_ahead():
    assert ClaimAhead(4, 1, lease=30).jobs() == 0
    assert fed(ClaimAhead(4, 1, lease=30)).jobs() == 0


def test_fast_handlers_claim_what_the_worker_finishes_within_the_horizon():
    # 1,000 calls of 50 us each in 0.1 s: 10,000 calls/s, so 0.1 s holds 1,000.
    estimate = fed(ClaimAhead(4, 1, lease=30), (1_000, 0.05, 0.1))

    assert estimate.jobs() == pytest.approx(10_000 * HORIZON, abs=1)


def test_jobs_of_seconds_claim_nothing_ahead():
    # Four threads finished four 2 s jobs in 2 s.
    estimate = fed(ClaimAhead(4, 1, lease=30), (4, 8.0, 2.0))

    assert estimate.jobs() == 0


def test_the_threads_pace_caps_a_rate_that_handlers_got_slower_than():
    # 10,000 calls/s lately, but each call now takes 0.2 s on average: 4 threads finish 20 a
    # second, so 0.1 s holds 2.
    estimate = fed(ClaimAhead(4, 1, lease=30), (1_000, 200.0, 0.1))

    assert estimate.jobs() == 2


def test_a_short_lease_narrows_the_window_to_its_fraction():
    # 10,000 calls/s; a 0.5 s lease allows a tenth of it, 0.05 s: 500 jobs.
    estimate = fed(ClaimAhead(4, 1, lease=0.5), (1_000, 0.0, 0.1))

    assert estimate.jobs() == 500


def test_the_estimate_never_exceeds_max_claim():
    estimate = fed(ClaimAhead(4, 1, lease=30), (10_000_000, 0.0, 1.0))

    assert estimate.jobs() == MAX_CLAIM


def test_a_batch_consumer_claims_a_full_call_per_call_ahead():
    estimate = fed(ClaimAhead(4, 10, lease=30), (100, 0.0, 1.0))  # 100 calls/s: 10 ahead

    assert estimate.jobs() == 100


def test_after_an_idle_spell_the_estimate_starts_again_near_the_free_threads():
    estimate = fed(ClaimAhead(4, 1, lease=30), (10_000, 0.5, 1.0))
    assert estimate.jobs() > 500

    estimate.observe(10_000, 0.5, 30.0)  # nothing finished for 29 s

    assert estimate.jobs() == 0


def test_the_rate_follows_the_last_second_more_than_the_ones_before():
    # Fast for a second, then 100 calls/s for three seconds.
    estimate = fed(ClaimAhead(4, 1, lease=30), (10_000, 0.1, 1.0), (10_100, 0.1, 2.0),
                   (10_200, 0.1, 3.0), (10_300, 0.1, 4.0))  # fmt: skip

    assert estimate.rate() < 2_000


def test_ahead_of_feeds_the_totals_at_each_read_with_its_clock():
    totals = iter([(0, 0.0), (1_000, 0.01)])
    times = iter([0.0, 0.1])
    jobs = ahead_of(ClaimAhead(4, 1, lease=30), lambda: next(totals), lambda: next(times))

    assert [jobs(), jobs()] == [0, 1_000]


def _claimer(queues, capacity: int, batch: int | None, ahead: int) -> Claimer:
    paused = PausedQueues("default", [q.name for q in queues], every=60.0)
    return Claimer(queues, "w", InFlight(), lambda handles: None, capacity, batch, paused, None,
                   ahead=lambda: ahead)  # fmt: skip


@pytest.mark.django_db
def test_a_claim_takes_the_free_threads_and_the_jobs_ahead(q):
    q.enqueue_many(range(50))
    claimer = _claimer([q], capacity=4, batch=None, ahead=20)

    assert claimer.run_once() == 24


@pytest.mark.django_db
def test_the_batch_pins_the_claim_size_whatever_the_estimate(q):
    q.enqueue_many(range(50))
    claimer = _claimer([q], capacity=4, batch=3, ahead=20)

    assert claimer.run_once() == 3


@pytest.mark.django_db
def test_with_jobs_ahead_a_top_up_waits_for_half_of_threads_and_jobs_ahead(q):
    q.enqueue_many(range(50))
    claimer = _claimer([q], capacity=4, batch=None, ahead=20)
    claimer.run_once()

    assert claimer.refill == 12
