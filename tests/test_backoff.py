"""The retry curve: equal-jitter exponential, capped at one hour."""

from __future__ import annotations

import random

import pytest

from django_alkqueue.backoff import exponential_cap, exponential_delay


@pytest.mark.parametrize("attempt", range(1, 13))
def test_delays_land_in_half_cap_to_cap_and_spread_over_it(attempt):
    base = 5
    cap = min(base * 2 ** (attempt - 1), 3600)
    rng = random.Random(attempt)
    draws = [exponential_delay(attempt, base, rng=rng) for _ in range(300)]
    assert all(cap / 2 <= d <= cap for d in draws)
    assert len(set(draws)) > 250
    # Spread: both halves of the range are hit, not a constant.
    middle = cap * 0.75
    assert sum(d < middle for d in draws) > 60
    assert sum(d >= middle for d in draws) > 60


@pytest.mark.parametrize("attempt", [40, 10**6])
def test_the_one_hour_cap_holds_for_huge_attempts(attempt):
    assert exponential_cap(attempt, 5) == 3600
    draws = [exponential_delay(attempt, 5) for _ in range(200)]
    assert all(1800 <= d <= 3600 for d in draws)


def test_a_zero_base_retries_immediately():
    assert exponential_delay(3, 0) == 0


def test_retry_through_a_handle_draws_from_the_curve(make_queue, clock, db):
    from datetime import timedelta

    q = make_queue("jitter", backoff_base=5, max_attempts=100, rng=random.Random(7))
    delays = []
    for _ in range(40):
        job = q.enqueue(1)
        q.claim_one("w").retry()
        delays.append((q.get_job(job.id).run_at - clock.now).total_seconds())
        q.cancel(job.id)
    assert all(2.5 <= d <= 5 for d in delays)
    assert len(set(delays)) > 30
    assert timedelta(seconds=min(delays)) >= timedelta(seconds=2.5)


def retry_delays_at_attempt(q, clock, attempt: int, draws: int) -> list[float]:
    """`draws` jobs claimed for their `attempt`-th time, each retried with no delay."""
    from django_alkqueue.models import QueueMessage

    ids = [job.id for job in q.enqueue_many([None] * draws)]
    # The attempts before this one, written straight into the rows (no lease to wait for).
    QueueMessage.objects.filter(id__in=ids).update(attempts=attempt - 1, max_attempts=attempt + 1)
    handles = q.claim("w", n=draws)
    assert [h.job.attempts for h in handles] == [attempt] * draws
    assert all(h.retry() for h in handles)
    delays = [(q.get_job(i).run_at - clock.now).total_seconds() for i in ids]
    q.purge()
    return delays


@pytest.mark.parametrize("attempt", range(1, 13))
def test_retry_without_delay_lands_in_half_cap_to_cap(make_queue, clock, db, attempt):
    q = make_queue("jitter", backoff_base=5, rng=random.Random(attempt))
    cap = min(5 * 2 ** (attempt - 1), 3600)
    delays = retry_delays_at_attempt(q, clock, attempt, draws=200)
    assert all(cap / 2 <= d <= cap for d in delays)
    assert len(set(delays)) > 150


@pytest.mark.parametrize("attempt", [40, 10**6])
def test_retry_without_delay_keeps_the_one_hour_cap_for_huge_attempts(make_queue, clock, db,
                                                                     attempt):  # fmt: skip
    q = make_queue("jitter", backoff_base=5, rng=random.Random(attempt))
    delays = retry_delays_at_attempt(q, clock, attempt, draws=200)
    assert all(1800 <= d <= 3600 for d in delays)
