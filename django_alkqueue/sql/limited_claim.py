"""The claim of a queue with limits (docs/flow-control.md), one implementation for every
dialect, written with the ORM so that PostgreSQL, SQLite and MariaDB run the same steps.

One transaction, in this order:

1. gate     - lock the queue's ClaimGate row (an UPDATE: the row lock on PostgreSQL and InnoDB,
              the database's write lock on SQLite). Every limited claim of the queue passes
              here one at a time, and holds the lock until it commits, so the counts below
              cannot change under it by another claim: only claims add live claims or ledger
              entries, and acks, retries, releases, failures and reclaims only remove them.
2. reclaim  - the queue's lapsed claims go back to pending (or to the dead letters when out of
              attempts), as the leader's reclaim does: until then they hold their slots.
3. count    - live claims of the queue (index alkqueue_lease_idx, claimed rows only), per key
              among them, and the ledger's claims within each rate's period
              (alkqueue_claimledger_idx): the room left under each limit.
4. choose   - due rows in handout order (alkqueue_pending_idx), leaving out the keys with no
              room, so a full key never blocks the others; re-read with the keys that filled
              up on the way until the room is used or no row is left.
5. stamp    - the chosen rows get this claim's token and lease; the ledger gets one row for
              the queue and one per key (with their counts) when a rate is set, and loses the
              rows older than the longest period.

The counts read in 3 are taken after the lock in 1: on PostgreSQL and MariaDB (READ
COMMITTED) each statement sees every commit made before it started, so the claim that held
the lock before has committed its claims by then; SQLite has a single writer.
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, F, Q, QuerySet, Sum

from ..jobs import MAX_ATTEMPTS_EXCEEDED, Job
from ..limits import Limits, Rate
from ..models import ClaimGate, ClaimLedger, QueueMessage
from .base import Claim
from .orm import OrmDialect
from .orm_rows import HANDOUT, live_rows, not_expired

#: The ledger's key for the queue's own count (a concurrency key is never empty).
QUEUE_WIDE = ""

_rows = OrmDialect()  # ORM rows are read and buried the same way on every database


def claim(
    connection: BaseDatabaseWrapper,
    queue: str,
    worker_id: str,
    n: int,
    now: datetime,
    limits: Limits,
) -> tuple[list[tuple[Job, Claim]], list[Job]]:
    """Claim up to n due jobs of `queue` within `limits`; returns (each job and its claim,
    in handout order; the jobs dead-lettered on the way)."""
    alias = connection.alias
    live = QueueMessage.objects.using(alias).filter(queue=queue)
    with transaction.atomic(using=alias):
        _lock_gate(alias, queue, now)
        dead = _reclaim_lapsed(connection, live, now)
        room = min(n, _queue_room(alias, live, queue, now, limits))
        chosen = _choose(alias, live, queue, now, limits, room) if room > 0 else []
        handed = _stamp(live, chosen, worker_id, now)
        if limits.rate is not None or limits.key_rate is not None:
            _record(alias, queue, now, limits, [job for job, _ in handed])
    return handed, [_rows.to_job(row, now) for row in dead]


def _lock_gate(alias: str, queue: str, now: datetime) -> None:
    """Take the queue's gate lock, creating its row the first time (a creator that loses
    the race waits for the winner's lock instead)."""
    gates = ClaimGate.objects.using(alias).filter(queue=queue)
    if gates.update(claimed_at=now):
        return
    try:
        with transaction.atomic(using=alias):
            ClaimGate.objects.using(alias).create(queue=queue, claimed_at=now)
    except IntegrityError:
        gates.update(claimed_at=now)


def _reclaim_lapsed(
    connection: BaseDatabaseWrapper, live: QuerySet[QueueMessage], now: datetime
) -> list[tuple[object, ...]]:
    """The queue's lapsed claims free their slots: pending again with attempts left, else
    dead letters. Returns the dead rows."""
    lapsed = live.filter(claim_token__isnull=False, lease_expires_at__lte=now)
    exhausted = list(lapsed.filter(attempts__gte=F("max_attempts")).values_list("id", flat=True))
    dead = (
        _rows._bury_ids(connection, exhausted, now, MAX_ATTEMPTS_EXCEEDED, MAX_ATTEMPTS_EXCEEDED)
        if exhausted
        else []
    )
    lapsed.update(claim_token=None, claimed_by=None, claimed_at=None, lease_expires_at=None)
    return dead


def _in_window(alias: str, queue: str, rate: Rate, now: datetime) -> QuerySet[ClaimLedger]:
    """Ledger rows of the half-open window ending now: claimed after now - period."""
    since = now - timedelta(seconds=rate.period)
    return ClaimLedger.objects.using(alias).filter(queue=queue, claimed_at__gt=since)


def _queue_room(
    alias: str, live: QuerySet[QueueMessage], queue: str, now: datetime, limits: Limits
) -> int:
    """How many more claims the queue-wide limits allow now."""
    room = 2**31
    if limits.concurrency is not None:
        room = limits.concurrency - live.filter(claim_token__isnull=False).count()
    if limits.rate is not None:
        window = _in_window(alias, queue, limits.rate, now).filter(concurrency_key=QUEUE_WIDE)
        used = window.aggregate(total=Sum("count"))["total"] or 0
        room = min(room, limits.rate.count - used)
    return room


def _key_rooms(
    alias: str, live: QuerySet[QueueMessage], queue: str, now: datetime, limits: Limits
) -> tuple[dict[str, int], int | None]:
    """Per key with live claims or ledger rows, the room its limits leave; and the room of
    any other key (None when keys are not limited)."""
    held: dict[str, int] = {}
    used: dict[str, int] = {}
    if limits.key_concurrency is not None:
        held = dict(
            live.filter(claim_token__isnull=False, concurrency_key__isnull=False)
            .values_list("concurrency_key")
            .annotate(n=Count("id"))
            .order_by()
        )
    if limits.key_rate is not None:
        used = dict(
            _in_window(alias, queue, limits.key_rate, now)
            .exclude(concurrency_key=QUEUE_WIDE)
            .values_list("concurrency_key")
            .annotate(total=Sum("count"))
            .order_by()
        )

    def room_of(key: str) -> int:
        left = 2**31
        if limits.key_concurrency is not None:
            left = limits.key_concurrency - held.get(key, 0)
        if limits.key_rate is not None:
            left = min(left, limits.key_rate.count - used.get(key, 0))
        return left

    if limits.key_concurrency is None and limits.key_rate is None:
        return {}, None
    return {key: room_of(key) for key in {*held, *used}}, room_of(QUEUE_WIDE)


def _choose(
    alias: str,
    live: QuerySet[QueueMessage],
    queue: str,
    now: datetime,
    limits: Limits,
    room: int,
) -> list[tuple[int, float]]:
    """(id, lease) of up to `room` due rows in handout order, each key within its room."""
    due = (
        live.filter(not_expired(now), claim_token__isnull=True, run_at__lte=now)
        .order_by(*HANDOUT)
        .values_list("id", "lease", "concurrency_key")
    )
    rooms, fresh_room = _key_rooms(alias, live, queue, now, limits)
    if fresh_room is None:  # no key limits: the first `room` rows
        return [(job_id, lease) for job_id, lease, _ in due[:room]]
    full = {key for key, left in rooms.items() if left <= 0}
    chosen: list[tuple[int, float]] = []
    taken: Counter[str] = Counter()
    while len(chosen) < room:
        wanted = room - len(chosen)
        page = list(
            due.exclude(concurrency_key__in=full).exclude(id__in=[i for i, _ in chosen])[
                : 2 * wanted + 16
            ]
        )
        for job_id, lease, key in page:
            if len(chosen) == room:
                break
            if key is not None:
                if key in full:
                    continue
                taken[key] += 1
                if taken[key] >= rooms.get(key, fresh_room):
                    full.add(key)
            chosen.append((job_id, lease))
        if len(page) < 2 * wanted + 16:
            break  # no row left beyond this page
    return chosen


def _stamp(
    live: QuerySet[QueueMessage], chosen: list[tuple[int, float]], worker_id: str, now: datetime
) -> list[tuple[Job, Claim]]:
    """Claim the chosen rows with one token; returns them in handout order."""
    if not chosen:
        return []
    token = uuid.uuid4()
    for lease, rows in itertools.groupby(sorted(chosen, key=lambda r: r[1]), key=lambda r: r[1]):
        live.filter(id__in=[job_id for job_id, _ in rows], claim_token__isnull=True).update(
            attempts=F("attempts") + 1, claim_token=token, claimed_by=worker_id,
            claimed_at=now, lease_expires_at=now + timedelta(seconds=lease),
        )  # fmt: skip
    ids = [job_id for job_id, _ in chosen]
    claimed = live_rows(live.filter(id__in=ids, claim_token=token))
    handed = [(_rows.to_job(row, now), Claim(row[0], token)) for row in claimed]
    handed.sort(key=lambda pair: (-pair[0].priority, pair[0].run_at, pair[0].id))
    return handed


def _record(alias: str, queue: str, now: datetime, limits: Limits, jobs: list[Job]) -> None:
    """Write this claim into the ledger (the queue's count, and each key's) and drop the
    rows no window can count any more."""
    ledger = ClaimLedger.objects.using(alias)
    periods = [rate.period for rate in (limits.rate, limits.key_rate) if rate is not None]
    ledger.filter(Q(queue=queue), Q(claimed_at__lte=now - timedelta(seconds=max(periods)))).delete()
    if not jobs:
        return
    entries = []
    if limits.rate is not None:
        entries.append(ClaimLedger(queue=queue, concurrency_key=QUEUE_WIDE, claimed_at=now,
                                   count=len(jobs)))  # fmt: skip
    if limits.key_rate is not None:
        per_key = Counter(job.concurrency_key for job in jobs if job.concurrency_key is not None)
        entries.extend(
            ClaimLedger(queue=queue, concurrency_key=key, claimed_at=now, count=count)
            for key, count in per_key.items()
        )
    ledger.bulk_create(entries)
