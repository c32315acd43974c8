"""Flow control as the operator sees it: the limits in force and where each comes from,
claimed vs concurrency, the due jobs held back right now ("throttled"), and the busiest keys.
Read-only; the overview, the queue page, the consumer page and `alk_status` show these
figures (docs/flow-control.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.utils.translation import pgettext_lazy

from .. import limits as flow
from ..limits import Limits, LimitsInForce, Rate
from ..models import ClaimLedger, Consumer, QueueMessage
from ..privacy import MASK

#: Keys the busiest-keys table lists.
BUSIEST_KEYS = 20
#: The ledger's key for the queue's own rate count (a concurrency key is never empty).
QUEUE_WIDE = ""


#: Where a limit comes from, as the pages and alk_status show it; JSON keeps the stored word.
SOURCE_LABELS = {
    flow.CODE: pgettext_lazy("limit source", "code"),
    flow.SETTINGS: pgettext_lazy("limit source", "settings"),
    flow.OVERRIDE: pgettext_lazy("limit source", "override"),
}


def source_label(source: str | None) -> str:
    """A limit's source in the active language ("-" for none)."""
    return "-" if source is None else str(SOURCE_LABELS.get(source, source))


@dataclasses.dataclass(frozen=True)
class KeyLoad:
    """One concurrency key of a queue: its claimed jobs and its due, unclaimed ones."""

    key: str
    running: int
    pending: int


@dataclasses.dataclass(frozen=True)
class FlowFigures:
    """A queue's flow control right now. `limits` holds each limit as text ("100/s", "8"; None
    for no limit) and `sources` where each limit in force comes from (code, settings or
    override)."""

    queue: str
    limits: dict[str, str | None]
    sources: dict[str, str]
    claimed: int
    concurrency: int | None
    throttled: int
    busiest_keys: list[KeyLoad]
    #: The keys are masked: the queue is sensitive and the reader may not see them.
    keys_masked: bool = False

    def with_keys_masked(self) -> FlowFigures:
        """These figures for a reader who may not see the queue's keys: each key masked, its
        counts kept (privacy.py)."""
        keys = [dataclasses.replace(k, key=MASK) for k in self.busiest_keys]
        return dataclasses.replace(self, busiest_keys=keys, keys_masked=True)

    @property
    def table(self) -> list[tuple[str, str | None, str | None]]:
        """(limit, value as text or None, where it comes from in words or None) for each."""
        return [
            (name, value, source_label(self.sources[name]) if name in self.sources else None)
            for name, value in self.limits.items()
        ]


#: The limits in force from a Consumer row's two columns already read (no query).
in_force = flow.limits_from_row


def figures(
    using: str, queue: str, now: datetime, limits: LimitsInForce, pending: int, claimed: int
) -> FlowFigures:
    """The flow figures of a queue with limits, given its pending and claimed counts."""
    return FlowFigures(
        queue=queue,
        limits=limits.limits.describe(),
        sources=dict(limits.sources),
        claimed=claimed,
        concurrency=limits.limits.concurrency,
        throttled=throttled(using, queue, now, limits.limits, pending, claimed),
        busiest_keys=busiest_keys(using, queue, now),
    )


# -- the busiest keys ------------------------------------------------------------------------


def _per_key(using: str, queue: str, now: datetime) -> QuerySet[Any, Any]:
    """Per concurrency key of the queue, its claimed and its due unclaimed jobs: one GROUP BY
    over alkqueue_concurrency_key_idx ((queue, concurrency_key), keyed rows only), which
    hands the rows over already grouped."""
    due = Q(claim_token__isnull=True, run_at__lte=now)
    return (
        QueueMessage.objects.using(using)
        .filter(queue=queue, concurrency_key__isnull=False)
        .values("concurrency_key")
        .annotate(
            running=Count("id", filter=Q(claim_token__isnull=False)),
            pending=Count("id", filter=due),
        )
        .filter(Q(running__gt=0) | Q(pending__gt=0))
    )


def busiest_keys(using: str, queue: str, now: datetime, top: int = BUSIEST_KEYS) -> list[KeyLoad]:
    """The `top` keys with the most claimed plus due jobs, busiest first. One query
    (alkqueue_concurrency_key_idx)."""
    rows = _per_key(using, queue, now).order_by("-running", "-pending", "concurrency_key")[:top]
    return [KeyLoad(r["concurrency_key"], r["running"], r["pending"]) for r in rows]


# -- throttled -------------------------------------------------------------------------------


def throttled(
    using: str, queue: str, now: datetime, limits: Limits, pending: int, claimed: int
) -> int:
    """The due jobs a claim would skip if one asked now: every one of them while the queue's
    concurrency is taken or its rate spent; otherwise those of each key beyond the room its
    key_concurrency and key_rate leave. Jobs merely waiting for a free worker are not
    counted."""
    if not limits.any() or pending == 0:
        return 0
    if queue_room(using, queue, now, limits, claimed) <= 0:
        return pending
    if limits.key_concurrency is None and limits.key_rate is None:
        return 0
    used = _window_counts(using, queue, limits.key_rate, now, per_key=True)
    held = 0
    for row in _per_key(using, queue, now).order_by().iterator():
        room = key_room(limits, row["running"], used.get(row["concurrency_key"], 0))
        held += row["pending"] - min(row["pending"], max(room, 0))
    return held


def throttled_counts(
    using: str, now: datetime, counts: Mapping[str, tuple[int, int]]
) -> dict[str, int]:
    """Per queue of `counts` (its pending and claimed jobs), its throttled jobs: what the
    leader writes beside its reading for the scrape. One query for the queues' Consumer rows,
    then `throttled`'s indexed ones for each queue that has limits and due jobs."""
    if not counts:
        return {}
    stored = {
        queue: (code, overrides)
        for queue, code, overrides in Consumer.objects.using(using)
        .filter(queue__in=list(counts))
        .values_list("queue", "code_limits", "limit_overrides")
    }
    held = {}
    for queue, (pending, claimed) in counts.items():
        limits = in_force(queue, *stored.get(queue, (None, None))).limits
        held[queue] = throttled(using, queue, now, limits, pending, claimed)
    return held


def queue_room(using: str, queue: str, now: datetime, limits: Limits, claimed: int) -> int:
    """How many more claims the queue-wide limits allow now (a large number when none)."""
    room = 2**31
    if limits.concurrency is not None:
        room = limits.concurrency - claimed
    if limits.rate is not None:
        spent = _window_counts(using, queue, limits.rate, now, per_key=False).get(QUEUE_WIDE, 0)
        room = min(room, limits.rate.count - spent)
    return room


def key_room(limits: Limits, running: int, spent: int) -> int:
    """How many more claims one key's limits allow, given its live claims and its claims
    within key_rate's window."""
    room = 2**31
    if limits.key_concurrency is not None:
        room = limits.key_concurrency - running
    if limits.key_rate is not None:
        room = min(room, limits.key_rate.count - spent)
    return room


def _window_counts(
    using: str, queue: str, rate: Rate | None, now: datetime, *, per_key: bool
) -> dict[str, int]:
    """Claims the ledger holds in the rate's window (claimed after now - period), per key
    ("" is the queue's own count). Index alkqueue_claimledger_idx."""
    if rate is None:
        return {}
    window = ClaimLedger.objects.using(using).filter(
        queue=queue, claimed_at__gt=now - timedelta(seconds=rate.period)
    )
    window = (
        window.exclude(concurrency_key=QUEUE_WIDE)
        if per_key
        else window.filter(concurrency_key=QUEUE_WIDE)
    )
    rows = window.values_list("concurrency_key").annotate(n=Sum("count")).order_by()
    return {key: int(n or 0) for key, n in rows}
