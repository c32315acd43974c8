"""A worker's flow state: what it knows of its queues' limits (docs/flow-control.md) and fair
share (docs/fair-share.md). The runner builds one and hands it to the claimer, which claims
through it, and to the acker, which asks it which acks free a slot a claim waits for.

It holds four things, each keyed by (alias, queue): the limits in force, read again once
`every` seconds have passed (at most the poll interval, so a change made with set_limits
applies within one); whether the queue takes turns between fair keys and their weights,
read again once `fair_every` seconds have passed; the capped queues whose last claim their
limits held back; and when the rate of a queue whose window was spent frees room. The claim
reports the last two as its return value (Queue.claim_within); nothing else writes them.
Two workers in one process hold two flow states, and share none of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .. import fair_share, operations
from ..limits import REFRESH_EVERY, LimitsCache
from ..queues import JobHandle, Queue


class FlowState:
    """One worker's view of its queues' limits and fair share; see the module's docstring."""

    def __init__(
        self,
        every: float = REFRESH_EVERY,
        monotonic: Callable[[], float] = time.monotonic,
        fair_every: float = fair_share.REFRESH_EVERY,
    ) -> None:
        self.limits = LimitsCache(every)
        self.fair_share = fair_share.FairShareCache(operations.fair_share_in_force, fair_every)
        self.monotonic = monotonic
        self._held_back: set[tuple[str, str]] = set()
        self._limited: set[tuple[str, str]] = set()
        self._room_at: dict[tuple[str, str], float] = {}

    def claim(self, queue: Queue, worker_id: str, n: int) -> list[JobHandle]:
        """Queue.claim within the limits and taking the turns this state holds, noting what the
        limits did."""
        now = self.monotonic()
        key = (queue.using, queue.name)
        limits = self.limits.get(queue.name, queue.using, now)
        fair = self.fair_share.get(queue.name, queue.using, now)
        outcome = queue.claim_within(worker_id, n, limits, fair)
        if outcome.held_back and limits.holds_slots():
            self._held_back.add(key)
        else:
            self._held_back.discard(key)
        if outcome.held_back:
            self._limited.add(key)
        else:
            self._limited.discard(key)
        if outcome.room_in is None:
            self._room_at.pop(key, None)
        else:
            self._room_at[key] = now + outcome.room_in
        return outcome.handles

    def slots_wanted(self, queue: str, using: str) -> bool:
        """Whether a claimed job of `queue` holds a slot that a claim is waiting for: the
        queue has a cap, and its limits held its last claim back."""
        return (using, queue) in self._held_back

    def limited(self, queue: str, using: str) -> bool:
        """Whether the queue's limits (a cap or a rate) held its last claim back."""
        return (using, queue) in self._limited

    def room_at(self) -> float:
        """The monotonic time at which the first rate that held a claim back frees room
        (inf: none did)."""
        return min(self._room_at.values(), default=float("inf"))

    def looked_until(self, now: float) -> None:
        """A full look at `now` claims what every rate freed by then: no later look is due
        for those rooms."""
        for key, at in list(self._room_at.items()):
            if at <= now:
                del self._room_at[key]
