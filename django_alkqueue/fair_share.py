"""Fair share between fair keys (docs/fair-share.md): which queues take turns, and each key's
weight. The claim that takes the turns is sql/fair_turns.py's.

A queue takes turns while it has an unclaimed job with a fair key. A claim is told whether
it does (`in_force()`, a FairShare or None) before it chooses its statement. Queue.claim reads
that for each claim: one indexed probe (alkqueue_fair_key_idx), and the weights when it does.
A worker keeps the answer in its own flow state (a FairShareCache in worker/flow_state.py),
read again once REFRESH_EVERY seconds have passed, so that a queue without fair keys costs
its claims a dict lookup and one probe a second, and keeps its one-statement claim. Nothing
here is kept per process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from django.db.models import Count

from . import validation
from .conf import get_settings
from .exceptions import InvalidOption
from .models import Consumer, QueueMessage

#: Seconds a worker keeps an answer of in_force() (as limits.REFRESH_EVERY): jobs with a fair
#: key enqueued after a worker's read take turns from its claims after this long at most.
REFRESH_EVERY = 1.0


@dataclasses.dataclass(frozen=True)
class FairShare:
    """A queue that takes turns, and the weights of its keys (a key not named weighs 1)."""

    weights: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def weight(self, key: str | None) -> int:
        return 1 if key is None else self.weights.get(key, 1)


def settings_weights(queue: str) -> dict[str, int]:
    """The weights ALKQUEUE["QUEUES"][queue]["fair_weights"] sets (checked with the settings)."""
    return dict(get_settings().QUEUES.get(queue, {}).get("fair_weights", {}))


def stored_weights(stored: Any) -> dict[str, int]:
    """The operator's weights as the Consumer row holds them; an entry that does not parse
    (a column written by hand) is left out."""
    if not isinstance(stored, Mapping):
        return {}
    weights = {}
    for key, weight in stored.items():
        try:
            weights[validation.fair_key(key) or ""] = validation.fair_weight(weight)
        except InvalidOption:
            continue
    return weights


def weights_in_force(queue: str, *, using: str = "default") -> dict[str, int]:
    """Each key's weight where one is set: the operator's (set_fair_weight) over the settings'."""
    stored = Consumer.objects.using(using).filter(queue=queue).values_list("fair_weights").first()
    return {**settings_weights(queue), **stored_weights(stored[0] if stored else None)}


def uses_fair_keys(queue: str, *, using: str = "default") -> bool:
    """Whether the queue has an unclaimed job with a fair key (alkqueue_fair_key_idx)."""
    rows = QueueMessage.objects.using(using).filter(queue=queue, fair_key__isnull=False)
    return rows.unclaimed().exists()


def in_force(queue: str, *, using: str = "default") -> FairShare | None:
    """The queue's FairShare while it takes turns, else None, read now."""
    if not uses_fair_keys(queue, using=using):
        return None
    return FairShare(weights_in_force(queue, using=using))


class FairShareCache:
    """in_force() per (alias, queue), each read again once `every` seconds have passed by the
    time the caller gives (or that time is before the last reading: a clock set back).

    Never shared between owners: each worker keeps one in its flow state
    (worker/flow_state.py, on the monotonic clock).
    """

    def __init__(self, every: float = REFRESH_EVERY) -> None:
        self.every = every
        self._read: dict[tuple[str, str], tuple[float, FairShare | None]] = {}

    def get(self, queue: str, using: str, at: float) -> FairShare | None:
        """The queue's FairShare while it takes turns, else None, as read at most `every`
        seconds before `at`."""
        cached = self._read.get((using, queue))
        if cached is not None and cached[0] <= at < cached[0] + self.every:
            return cached[1]
        found = in_force(queue, using=using)
        self._read[(using, queue)] = (at, found)
        return found


@dataclasses.dataclass(frozen=True)
class KeyLoad:
    """A fair key with unclaimed jobs, for the admin's queue page: how many, and its weight."""

    key: str
    unclaimed: int
    weight: int


def keys_with_jobs(
    queue: str, stored: Any, *, using: str = "default", top: int = 50
) -> list[KeyLoad]:
    """The fair keys with the most unclaimed jobs, most first, with their weights (`stored`:
    the Consumer row's fair_weights, already read): one count per key over
    alkqueue_fair_key_idx (unclaimed keyed rows only)."""
    rows = (
        QueueMessage.objects.using(using)
        .filter(queue=queue, fair_key__isnull=False)
        .unclaimed()
        .values("fair_key")
        .annotate(n=Count("id"))
        .order_by("-n", "fair_key")[:top]
    )
    weights = {**settings_weights(queue), **stored_weights(stored)}
    return [KeyLoad(str(r["fair_key"]), r["n"], weights.get(str(r["fair_key"]), 1)) for r in rows]
