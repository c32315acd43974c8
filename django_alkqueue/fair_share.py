"""Fair share between fair keys (docs/fair-share.md): which queues take turns, and each key's
weight. The claim that takes the turns is sql/fair_turns.py's.

The admin's queue page lists the keys with unclaimed jobs, their weights and their share of
the last hour's fair claims (keys_with_jobs; the claims per key and 5-minute bucket are
FairClaims rows, which each fair claim adds to).

A queue takes turns while it has an unclaimed job with a fair key. A claim is told whether
it does (operations.fair_share_in_force(), a FairShare or None) before it chooses its
statement. Queue.claim reads that for each claim: one indexed probe
(alkqueue_fair_key_idx), and the weights when it does.
A worker keeps the answer in its own flow state (a FairShareCache in worker/flow_state.py),
read again once REFRESH_EVERY seconds have passed, so that a queue without fair keys costs
its claims a dict lookup and one probe a second, and keeps its one-statement claim. Nothing
here is kept per process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Case, Count, Subquery, Sum, Value, When

from . import validation
from .conf import get_settings
from .exceptions import InvalidOption
from .models import NO_FAIR_KEY, Consumer, FairClaims, QueueMessage

#: Seconds a worker keeps a reading of whether a queue takes turns (as limits.REFRESH_EVERY):
#: jobs with a fair key enqueued after a worker's read take turns from its claims after this
#: long at most.
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


class FairShareCache:
    """A reading per (alias, queue) (`read`, operations.fair_share_in_force for a worker),
    each read again once `every` seconds have passed by the
    time the caller gives (or that time is before the last reading: a clock set back).

    Never shared between owners: each worker keeps one in its flow state
    (worker/flow_state.py, on the monotonic clock).
    """

    def __init__(self, read: Callable[..., FairShare | None], every: float = REFRESH_EVERY) -> None:
        self.every = every
        self._read_now = read  # read(queue, using=alias)
        self._read: dict[tuple[str, str], tuple[float, FairShare | None]] = {}

    def get(self, queue: str, using: str, at: float) -> FairShare | None:
        """The queue's FairShare while it takes turns, else None, as read at most `every`
        seconds before `at`."""
        cached = self._read.get((using, queue))
        if cached is not None and cached[0] <= at < cached[0] + self.every:
            return cached[1]
        found = self._read_now(queue, using=using)
        self._read[(using, queue)] = (at, found)
        return found


#: The share of claims covers the FairClaims buckets that started within this long before now:
#: twelve buckets of five minutes, the newest still filling, so between the last 55 and 60
#: minutes of claims (docs/fair-share.md, "Share of claims").
SHARE_WINDOW = timedelta(hours=1)


@dataclasses.dataclass(frozen=True)
class KeyLoad:
    """A fair key for the admin's queue page: its unclaimed jobs (None for NO_FAIR_KEY, the
    jobs without a fair key, which are not counted), its weight, and its share of the queue's
    fair claims in the last SHARE_WINDOW (None: the queue had none)."""

    key: str
    unclaimed: int | None
    weight: int
    share: float | None = None


def keys_with_jobs(
    queue: str, stored: Any, now: datetime, *, using: str = "default", top: int = 50
) -> list[KeyLoad]:
    """The `top` fair keys with the most unclaimed jobs, most first, then up to `top` more that
    had fair claims in the last SHARE_WINDOW, most claims first (NO_FAIR_KEY among them), each
    with its weight (`stored`: the Consumer row's fair_weights, already read) and its share
    of those claims."""
    ready = _unclaimed_per_key(queue, using, top)
    claims, total = _claims_per_key(queue, using, now, list(ready), top)
    others = [key for key in claims if key not in ready][:top]
    unclaimed = dict(ready)
    if len(ready) == top:  # a key of `others` may have unclaimed jobs beyond the top ones
        unclaimed |= _unclaimed_per_key(queue, using, top, [k for k in others if k != NO_FAIR_KEY])
    weights = {**settings_weights(queue), **stored_weights(stored)}
    return [
        KeyLoad(
            key,
            None if key == NO_FAIR_KEY else unclaimed.get(key, 0),
            weights.get(key, 1),
            None if total is None else claims.get(key, 0) / total,
        )
        for key in [*ready, *others]
    ]


def _unclaimed_per_key(
    queue: str, using: str, top: int, keys: list[str] | None = None
) -> dict[str, int]:
    """The fair keys with the most unclaimed jobs (of `keys` when given), most first: one
    count per key over alkqueue_fair_key_idx (unclaimed keyed rows only)."""
    rows = QueueMessage.objects.using(using).filter(queue=queue, fair_key__isnull=False)
    if keys is not None:
        rows = rows.filter(fair_key__in=keys)
    counts = rows.unclaimed().values("fair_key").annotate(n=Count("id"))
    return {str(r["fair_key"]): r["n"] for r in counts.order_by("-n", "fair_key")[:top]}


def _claims_per_key(
    queue: str, using: str, now: datetime, first: list[str], top: int
) -> tuple[dict[str, int], int | None]:
    """The fair claims of the keys in `first` that had any in the last SHARE_WINDOW, then of
    up to `top` keys more, most claims first, and the queue's total (None when it had none):
    one read of alkqueue_fair_claims_key's rows, the total a subquery beside each row."""
    hour = FairClaims.objects.using(using).filter(queue=queue).since(now - SHARE_WINDOW)
    total = hour.values("queue").annotate(total=Sum("claims")).values("total")
    listed_first = Case(When(fair_key__in=first, then=Value(0)), default=Value(1))
    rows = (
        hour.values("fair_key")
        .annotate(n=Sum("claims"), total=Subquery(total))
        .order_by(*([listed_first] if first else []), "-n", "fair_key")[: len(first) + top]
    )
    found = [(str(r["fair_key"]), int(r["n"]), int(r["total"])) for r in rows]
    return {key: n for key, n, _ in found}, (found[0][2] if found else None)
