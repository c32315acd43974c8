"""A worker's flow state (worker/flow_state.py): each worker owns one, which its claimer claims
through and its acker asks; nothing is shared between two of them in one process, neither
the limits nor the fair share read."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from django_alkqueue import fair_share, operations
from django_alkqueue.consumers import consumer, registry
from django_alkqueue.models import Consumer
from django_alkqueue.queues import JobHandle, Queue
from django_alkqueue.worker.consumer_table import sync_consumers
from django_alkqueue.worker.flow_state import FlowState
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "flow-state"


class Ticks:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fq(make_queue: Callable[..., Queue]) -> Iterator[Queue]:
    yield make_queue(QUEUE)
    registry.unregister(QUEUE)


def limited(**limits: object) -> None:
    consumer(QUEUE, **limits)(lambda payload, job: None)


def keys_of(handles: list[JobHandle]) -> list[str]:
    """The fair keys of the jobs claimed, in handout order (each payload is its key)."""
    return [handle.job.payload for handle in handles]


def with_two_keys(fq: Queue) -> None:
    """Four jobs of key a, then two of b: two claims without turns take a, a; with, a and b."""
    fq.enqueue_many(["a"] * 4, fair_key="a")
    fq.enqueue_many(["b"] * 2, fair_key="b")


def test_a_claim_held_back_in_one_workers_flow_state_is_not_seen_by_anothers(fq: Queue) -> None:
    limited(concurrency=1)
    fq.enqueue_many([1, 2])
    first, second = FlowState(), FlowState()

    assert len(first.claim(fq, "w1", 2)) == 1

    assert first.slots_wanted(QUEUE, "default")
    assert not second.slots_wanted(QUEUE, "default")


def test_a_claim_that_got_its_fill_wants_no_slot(fq: Queue) -> None:
    limited(concurrency=2)
    fq.enqueue_many([1, 2, 3])
    state = FlowState()

    assert len(state.claim(fq, "w", 2)) == 2

    assert not state.slots_wanted(QUEUE, "default")


def test_a_claim_held_back_by_a_rate_alone_wants_no_slot(fq: Queue) -> None:
    limited(rate="1/m")
    fq.enqueue_many([1, 2])
    state = FlowState()

    assert len(state.claim(fq, "w", 2)) == 1

    assert not state.slots_wanted(QUEUE, "default")  # no slot to free: only time frees room


def test_the_flow_state_reads_changed_limits_again_once_its_interval_has_passed(
    fq: Queue,
) -> None:
    limited(concurrency=1)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    fq.enqueue_many(range(5))
    ticks = Ticks()
    state = FlowState(every=0.5, monotonic=ticks)
    assert len(state.claim(fq, "w", 10)) == 1
    # Another process's set_limits: this one learns of it only by reading again.
    Consumer.objects.filter(queue=QUEUE).update(limit_overrides={"concurrency": 3})

    assert state.claim(fq, "w", 10) == []  # read 0 s ago: the old cap
    ticks.now += 0.5
    assert len(state.claim(fq, "w", 10)) == 2


def test_a_rate_that_held_a_claim_back_sets_the_next_look_to_when_it_frees_room(
    fq: Queue, clock: FakeClock
) -> None:
    limited(rate="2/s")
    fq.enqueue_many(range(5))
    ticks = Ticks()
    state = FlowState(monotonic=ticks)
    assert state.room_at() == float("inf")
    assert len(state.claim(fq, "w", 2)) == 2  # spends the window: no look yet
    clock.advance(0.25)

    assert state.claim(fq, "w", 2) == []

    assert state.room_at() == pytest.approx(ticks.now + 0.75)


def test_a_full_look_forgets_the_rooms_it_looked_for(fq: Queue, clock: FakeClock) -> None:
    limited(rate="2/s")
    fq.enqueue_many(range(5))
    ticks = Ticks()
    state = FlowState(monotonic=ticks)
    state.claim(fq, "w", 3)
    due = state.room_at()

    state.looked_until(due - 0.1)
    assert state.room_at() == due
    state.looked_until(due)
    assert state.room_at() == float("inf")


def test_the_flow_state_reads_limits_this_process_changed_at_once(fq: Queue) -> None:
    limited(concurrency=1)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    fq.enqueue_many(range(5))
    state = FlowState(every=60, monotonic=Ticks())
    assert len(state.claim(fq, "w", 10)) == 1
    operations.set_limits(QUEUE, concurrency=3)
    assert len(state.claim(fq, "w", 10)) == 2


# -- fair share ----------------------------------------------------------------------------


def test_two_flow_states_in_one_process_keep_their_own_fair_share_reads(fq: Queue) -> None:
    first, second = FlowState(monotonic=Ticks()), FlowState(monotonic=Ticks())
    assert first.claim(fq, "w1", 2) == []  # its reading: the queue takes no turns
    with_two_keys(fq)

    assert keys_of(first.claim(fq, "w1", 2)) == ["a", "a"]
    assert sorted(keys_of(second.claim(fq, "w2", 2))) == ["a", "b"]


def test_the_flow_state_takes_turns_once_its_fair_interval_has_passed(fq: Queue) -> None:
    ticks = Ticks()
    state = FlowState(monotonic=ticks)
    assert state.claim(fq, "w", 2) == []
    with_two_keys(fq)
    assert keys_of(state.claim(fq, "w", 2)) == ["a", "a"]  # read 0 s ago: no turns

    ticks.now += fair_share.REFRESH_EVERY

    assert sorted(keys_of(state.claim(fq, "w", 2))) == ["a", "b"]


def test_a_flow_state_with_a_fair_interval_of_zero_reads_the_fair_share_at_each_claim(
    fq: Queue,
) -> None:
    state = FlowState(monotonic=Ticks(), fair_every=0)
    assert state.claim(fq, "w", 2) == []
    with_two_keys(fq)

    assert sorted(keys_of(state.claim(fq, "w", 2))) == ["a", "b"]
