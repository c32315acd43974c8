"""The turns of a fair claim (docs/fair-share.md): which due rows a claim of a queue with fair
keys takes, and where each key stands afterwards. Every dialect runs these steps inside the
claim of sql/limited_claim.py, under the queue's ClaimGate lock, so turns hold across
concurrent claims of the queue.

Each key has a turn: the place its next job starts from, in rounds. A key's j-th due job
(handout order within the key) stands at `max(turn, clock) + (j - 1) / weight`, where the
clock is the place of the last job a claim handed out (ClaimGate.fair_clock): a key with no
row (FairTurn) stands at the clock. The claim takes the due jobs in (priority, place, run_at,
id) order; each key that got m jobs moves on by m / weight, and the clock to the place of the
last job taken. Rows at or behind the clock say no more than a missing row, and are deleted.

The read is bounded per key: at most the claim's size of due jobs of each key (a window
function over alkqueue_pending_idx's rows), the ids and sort keys only; the chosen rows are
read whole afterwards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import NamedTuple

from django.db import connections
from django.db.models import (
    Case,
    F,
    FloatField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce, Greatest, RowNumber

from ..models import NO_FAIR_KEY, ClaimGate, FairTurn, QueueMessage

#: The FairTurn (and FairClaims) key of the jobs without a fair key.
NO_KEY = NO_FAIR_KEY


class Candidate(NamedTuple):
    """A due row as the turns see it: its id, its key's start and its place in the fair order,
    and its keys."""

    id: int
    priority: int
    start: float
    place: float
    run_at: datetime
    fair_key: str
    concurrency_key: str | None


def _rounded(place: float) -> float:
    """A place to a billionth of a round: thirds and sevenths added up do not drift apart."""
    return round(place, 9)


def read_clock(alias: str, queue: str) -> float:
    """The queue's fair clock; the caller holds the gate lock."""
    clock = ClaimGate.objects.using(alias).filter(queue=queue).values_list("fair_clock").first()
    return clock[0] if clock else 0.0


def candidates(
    due: QuerySet[QueueMessage],
    queue: str,
    clock: float,
    weights: Mapping[str, int],
    per_key: int,
    limit: int,
) -> list[Candidate]:
    """The first `limit` due rows in fair order, among the first `per_key` of each fair key
    (None: the no-key jobs). The database ranks, places and sorts them: only those come back."""
    ahead = FairTurn.objects.filter(
        queue=queue, fair_key=Coalesce(OuterRef("fair_key"), Value(NO_KEY))
    ).values("turn")[:1]
    at_clock = Value(clock, output_field=FloatField())
    start = Greatest(Coalesce(Subquery(ahead, output_field=FloatField()), at_clock), at_clock)
    weight = Case(
        *[When(fair_key=key, then=Value(float(w))) for key, w in weights.items()],
        default=Value(1.0),
        output_field=FloatField(),
    )
    rank = Window(
        RowNumber(),
        partition_by=[F("fair_key")],
        order_by=[F("priority").desc(), F("run_at").asc(), F("id").asc()],
    )
    ranked = (
        due.annotate(fair_rank=rank, fair_start=start, fair_weight=weight)
        .annotate(fair_place=F("fair_start") + (F("fair_rank") - 1) / F("fair_weight"))
        .filter(fair_rank__lte=per_key)
        .order_by("-priority", "fair_place", "run_at", "id")
        .values_list("id", "priority", "fair_start", "fair_place", "run_at", "fair_key",
                     "concurrency_key")[:limit]
    )  # fmt: skip
    return [
        Candidate(job_id, priority, start, _rounded(place), run_at,
                  NO_KEY if fair_key is None else fair_key, concurrency_key)
        for job_id, priority, start, place, run_at, fair_key, concurrency_key in ranked
        if run_at is not None  # due rows all have one: a waiting row has none
    ]  # fmt: skip


def advance(
    alias: str, queue: str, clock: float, taken: list[Candidate], weights: Mapping[str, int]
) -> Counter[str]:
    """After the claim took `taken`: each key moves on by its jobs over its weight, the clock
    to the last place taken; rows at or behind the clock go. Returns each key's jobs taken
    (NO_KEY: those without a fair key)."""
    if not taken:
        return Counter()
    clock = max(clock, max(c.place for c in taken))
    counts = Counter(c.fair_key for c in taken)
    starts = {c.fair_key: c.start for c in taken}
    moved = {key: _rounded(starts[key] + m / weights.get(key, 1)) for key, m in counts.items()}
    ahead = [FairTurn(queue=queue, fair_key=k, turn=t) for k, t in moved.items() if t > clock]
    ClaimGate.objects.using(alias).filter(queue=queue).update(fair_clock=clock)
    FairTurn.objects.using(alias).filter(queue=queue, turn__lte=clock).delete()
    if ahead:
        # MySQL and MariaDB name no conflict target: any unique key's conflict updates.
        targeted = connections[alias].features.supports_update_conflicts_with_target
        FairTurn.objects.using(alias).bulk_create(
            ahead,
            update_conflicts=True,
            unique_fields=["queue", "fair_key"] if targeted else None,
            update_fields=["turn"],
        )
    return counts
