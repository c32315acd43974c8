"""The worker's claim step: how much it claims and when it claims again at once."""

from __future__ import annotations

import pytest

from django_alkqueue.queues import JobHandle
from django_alkqueue.worker.acker import MAX_BATCH
from django_alkqueue.worker.claimer import Claimer, PausedQueues
from django_alkqueue.worker.inflight import InFlight

pytestmark = pytest.mark.django_db


def _claimer(queues, capacity: int, batch: int | None) -> tuple[Claimer, list[JobHandle]]:
    dispatched: list[JobHandle] = []
    names = [q.name for q in queues]
    paused = PausedQueues("default", names, every=60.0)
    claimer = Claimer(queues, "w", InFlight(), dispatched.extend, capacity, batch, paused, None)
    return claimer, dispatched


def test_a_claim_that_fills_the_batch_comes_back_full(q):
    q.enqueue_many(range(5))
    claimer, dispatched = _claimer([q], capacity=4, batch=None)
    assert claimer.run_once() == 4
    assert claimer.came_back_full
    assert len(dispatched) == 4


def test_a_short_claim_does_not_come_back_full(q):
    q.enqueue_many(range(3))
    claimer, _ = _claimer([q], capacity=4, batch=None)
    assert claimer.run_once() == 3
    assert not claimer.came_back_full


def test_an_empty_queue_does_not_come_back_full(q):
    claimer, _ = _claimer([q], capacity=4, batch=None)
    assert claimer.run_once() == 0
    assert not claimer.came_back_full


def test_the_batch_caps_one_claim_below_the_free_capacity(q):
    q.enqueue_many(range(10))
    claimer, _ = _claimer([q], capacity=8, batch=3)
    assert claimer.run_once() == 3
    assert claimer.came_back_full


def test_one_full_queue_among_several_is_enough_to_claim_again(make_queue):
    busy, quiet = make_queue("busy"), make_queue("quiet")
    busy.enqueue_many(range(10))
    quiet.enqueue(1)
    claimer, dispatched = _claimer([quiet, busy], capacity=8, batch=2)
    claimer.run_once()
    assert claimer.came_back_full
    assert sorted(h.job.queue for h in dispatched) == ["busy", "busy", "quiet"]


def test_jobs_awaiting_their_ack_beyond_a_full_batch_take_capacity_like_running_ones(q):
    q.enqueue_many(range(MAX_BATCH + 10))
    finished = q.claim("w", MAX_BATCH + 4)
    claimer, _ = _claimer([q], capacity=4, batch=None)
    claimer.inflight.add_all(finished)
    claimer.inflight.handlers_done(finished)  # every thread free, the acker 4 jobs too far behind
    assert claimer.run_once() == 0
    claimer.inflight.remove_all(finished[:4])  # the acker caught up
    assert claimer.run_once() == 4
