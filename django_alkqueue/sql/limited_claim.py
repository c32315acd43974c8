"""The claim of a queue with limits (docs/flow-control.md), written with the ORM so that SQLite,
MariaDB and the ORM dialect run the same steps (Dialect.limited_claim). PostgreSQL runs these
steps in statements of its own after the same gate (sql/postgresql/limited_claim.py).

One transaction, in this order:

1. gate     - lock the queue's ClaimGate row (an UPDATE: the row lock on PostgreSQL and InnoDB,
              the database's write lock on SQLite). Every limited claim of the queue passes
              here one at a time, and holds the lock until it commits, so the counts below
              cannot change under it by another claim: only claims add live claims or ledger
              entries, and acks, retries, releases, failures and reclaims only remove them.
2. count    - live claims of the queue per key, and how many lapsed, in one read (index
              alkqueue_lease_idx, claimed rows only); lapsed ones are reclaimed first (back
              to pending, or dead letters when out of attempts), as the leader's reclaim
              does: until then they hold their slots. Then the ledger's claims within each
              rate's period (alkqueue_claimledger_idx): the room left under each limit.
3. choose   - due rows in handout order (alkqueue_pending_idx), leaving out the keys with no
              room, so a full key never blocks the others; re-read with the keys that filled
              up on the way until the room is used or no row is left.
4. stamp    - the chosen rows get this claim's token and lease; the ledger gets one row for
              the queue and one per key (with their counts) when a rate is set, and loses the
              rows older than the longest period. A fair claim moves its keys' turns on and
              adds their jobs to the current bucket of FairClaims (sql/fair_claims.py).

The counts read in 2 are taken after the lock in 1: on PostgreSQL and MariaDB (READ
COMMITTED) each statement sees every commit made before it started, so the claim that held
the lock before has committed its claims by then; SQLite has a single writer.
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, F, Q, QuerySet, Sum

from ..jobs import MAX_ATTEMPTS_EXCEEDED, Job
from ..limit_values import Limits, Rate
from ..models import ClaimGate, ClaimLedger, QueueMessage
from . import fair_turns
from .base import ROW_FIELDS, Claim, Claimed, Dialect, Row
from .orm_rows import HANDOUT, live_rows, not_expired

#: The ledger's key for the queue's own count (a concurrency key is never empty).
QUEUE_WIDE = ""
_LEASE_AT = ROW_FIELDS.index("lease")
_KEY_AT = ROW_FIELDS.index("concurrency_key")

# ORM rows come back converted by Django: the base dialect's to_job reads them as they are.
_rows = Dialect()


def claim(
    dialect: Dialect,
    connection: BaseDatabaseWrapper,
    queue: str,
    worker_id: str,
    n: int,
    now: datetime,
    limits: Limits,
    clock: Callable[[], datetime] | None = None,
    fair: Mapping[str, int] | None = None,
) -> Claimed:
    """Claim up to n due jobs of `queue` within `limits`; returns each job and its claim (in
    handout order), the jobs dead-lettered on the way, and what the limits did.

    With `fair` (the weights of a queue that takes turns, fair_share.py) the limits decide
    how many jobs, and the turns which (sql/fair_turns.py).

    `clock` is read again once the gate is held, for the counts, and once more after them,
    for the claim's time (claimed_at, the lease, the ledger): a claim's time is then never
    earlier than the end of any claim its counts left out (`now` is the floor of both)."""
    alias = connection.alias
    live = QueueMessage.objects.using(alias).filter(queue=queue)

    def read() -> datetime:
        return now if clock is None else max(now, clock())

    if not connection.features.has_select_for_update and not _anything_to_claim(live, now):
        # SQLite's gate is the database's write lock: an idle poll looks first, as its
        # unlimited claim does, so that it neither takes the lock nor waits for it.
        return Claimed([], [])
    room_in = None
    with transaction.atomic(using=alias):
        lock_gate(alias, queue, now)
        counted_at = read()
        held, lapsed = _live_claims_per_key(live, counted_at)
        dead = reclaim_lapsed(dialect, connection, live, counted_at) if lapsed else []
        if lapsed:
            held, _ = _live_claims_per_key(live, counted_at)
        room = min(n, _queue_room(alias, queue, counted_at, limits, held))
        if fair is None:
            rows = _choose(alias, live, queue, counted_at, limits, room, held) if room > 0 else []
            claimed_at = max(counted_at, read())
            handed = _stamp(live, rows, worker_id, claimed_at)
        else:
            at = fair_turns.read_clock(alias, queue)
            taken = _choose_fair(alias, live, queue, counted_at, limits, room, held, at, fair)
            rows = live_rows(live.filter(id__in=[c.id for c in taken])) if taken else []
            claimed_at = max(counted_at, read())
            place = {c.id: i for i, c in enumerate(taken)}
            handed = _stamp(live, rows, worker_id, claimed_at, place)
            ids = {claim.id for _, claim in handed}
            got = fair_turns.advance(alias, queue, at, [c for c in taken if c.id in ids], fair)
            if got:  # the share of claims the admin shows (sql/fair_claims.py)
                dialect.add_fair_claims(connection, queue, claimed_at, got)
        if limits.rate is not None or limits.key_rate is not None:
            _record(alias, queue, claimed_at, limits, [job for job, _ in handed])
            if limits.rate is not None and len(handed) < n:
                room_in = rate_frees_in(alias, queue, claimed_at, limits)
    held_back = was_held_back(limits, len(handed) < n, room < n)
    return Claimed(handed, dead, held_back, room_in)


def was_held_back(limits: Limits, short: bool, room_short: bool) -> bool:
    """Whether a claim that came back `short` was held back by its limits, not only for want
    of due jobs: the queue-wide limits left it less room than it asked for (`room_short`), or
    a key limit is set (which key left jobs out is not counted: a short claim may have)."""
    keyed = limits.key_concurrency is not None or limits.key_rate is not None
    return short and (room_short or keyed)


def _anything_to_claim(live: QuerySet[QueueMessage], now: datetime) -> bool:
    """A due row or a lapsed claim (alkqueue_pending_idx, alkqueue_lease_idx)."""
    due = Q(claim_token__isnull=True, run_at__lte=now)
    lapsed = Q(claim_token__isnull=False, lease_expires_at__lte=now)
    return live.filter(due | lapsed).exists()


def lock_gate(alias: str, queue: str, now: datetime) -> None:
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


def reclaim_lapsed(
    dialect: Dialect, connection: BaseDatabaseWrapper, live: QuerySet[QueueMessage], now: datetime
) -> list[Job]:
    """The queue's lapsed claims free their slots: pending again with attempts left, else
    dead letters (the dialect's dead_letter). Returns the jobs that died."""
    lapsed = live.filter(claim_token__isnull=False, lease_expires_at__lte=now)
    found = list(lapsed.values_list("id", "attempts", "max_attempts"))
    if not found:
        return []
    exhausted = [job_id for job_id, attempts, most in found if attempts >= most]
    dead = dialect.dead_letter(connection, exhausted, now, MAX_ATTEMPTS_EXCEEDED,
                               MAX_ATTEMPTS_EXCEEDED) if exhausted else []  # fmt: skip
    live.filter(id__in=[row[0] for row in found if row[0] not in exhausted]).update(
        claim_token=None, claimed_by=None, claimed_at=None, lease_expires_at=None
    )
    return [dialect.to_job(row, now) for row in dead]


def _live_claims_per_key(
    live: QuerySet[QueueMessage], now: datetime
) -> tuple[dict[str | None, int], int]:
    """Live claims of the queue per concurrency key (None: jobs without one), and how many
    of them lapsed, in one read of the claimed rows (alkqueue_lease_idx)."""
    per_key = (
        live.filter(claim_token__isnull=False)
        .values_list("concurrency_key")
        .annotate(n=Count("id"), lapsed=Count("id", filter=Q(lease_expires_at__lte=now)))
        .order_by()
    )
    held: dict[str | None, int] = {}
    lapsed = 0
    for key, count, lapsed_count in per_key:
        held[key] = count
        lapsed += lapsed_count
    return held, lapsed


def _in_window(alias: str, queue: str, rate: Rate, now: datetime) -> QuerySet[ClaimLedger]:
    """Ledger rows of the half-open window ending now: claimed after now - period."""
    since = now - timedelta(seconds=rate.period)
    return ClaimLedger.objects.using(alias).filter(queue=queue, claimed_at__gt=since)


def _queue_room(
    alias: str, queue: str, now: datetime, limits: Limits, held: dict[str | None, int]
) -> int:
    """How many more claims the queue-wide limits allow now."""
    room = 2**31
    if limits.concurrency is not None:
        room = limits.concurrency - sum(held.values())
    if limits.rate is not None:
        window = _in_window(alias, queue, limits.rate, now).filter(concurrency_key=QUEUE_WIDE)
        used = window.aggregate(total=Sum("count"))["total"] or 0
        room = min(room, limits.rate.count - used)
    return room


def _key_rooms(
    alias: str, queue: str, now: datetime, limits: Limits, held: dict[str | None, int]
) -> tuple[dict[str, int], int | None]:
    """Per key with live claims or ledger rows, the room its limits leave; and the room of
    any other key (None when keys are not limited)."""
    if limits.key_concurrency is None and limits.key_rate is None:
        return {}, None
    used: dict[str, int] = {}
    if limits.key_rate is not None:
        used = dict(
            _in_window(alias, queue, limits.key_rate, now)
            .exclude(concurrency_key=QUEUE_WIDE)
            .values_list("concurrency_key")
            .annotate(total=Sum("count"))
            .order_by()
        )

    def room_of(key: str | None) -> int:
        """None: a key with no live claim and no ledger row."""
        left = 2**31
        if limits.key_concurrency is not None:
            left = limits.key_concurrency - (0 if key is None else held.get(key, 0))
        if limits.key_rate is not None:
            left = min(left, limits.key_rate.count - (0 if key is None else used.get(key, 0)))
        return left

    keys = {key for key in held if key is not None} | set(used)
    return {key: room_of(key) for key in keys}, room_of(None)


def _choose(
    alias: str,
    live: QuerySet[QueueMessage],
    queue: str,
    now: datetime,
    limits: Limits,
    room: int,
    held: dict[str | None, int],
) -> list[Row]:
    """Up to `room` due rows (the row shape) in handout order, each key within its room."""
    due = live.filter(not_expired(now), claim_token__isnull=True, run_at__lte=now).order_by(
        *HANDOUT
    )
    rooms, fresh_room = _key_rooms(alias, queue, now, limits, held)
    if fresh_room is None:  # no key limits: the first `room` rows
        return live_rows(due, limit=room)
    full = {key for key, left in rooms.items() if left <= 0}
    chosen: list[Row] = []
    taken: Counter[str] = Counter()
    while len(chosen) < room:
        page_size = 2 * (room - len(chosen)) + 16
        candidates = due.exclude(concurrency_key__in=full).exclude(id__in=[r[0] for r in chosen])
        page = live_rows(candidates, limit=page_size)
        for row in page:
            if len(chosen) == room:
                break
            key = row[_KEY_AT]
            if key is not None:
                if key in full:
                    continue
                taken[key] += 1
                if taken[key] >= rooms.get(key, fresh_room):
                    full.add(key)
            chosen.append(row)
        if len(page) < page_size:
            break  # no row left beyond this page
    return chosen


def _choose_fair(
    alias: str,
    live: QuerySet[QueueMessage],
    queue: str,
    now: datetime,
    limits: Limits,
    room: int,
    held: dict[str | None, int],
    fair_clock: float,
    weights: Mapping[str, int],
) -> list[fair_turns.Candidate]:
    """Up to `room` due rows in fair order (sql/fair_turns.py), each concurrency key within
    its room. The candidates are the first of each fair key's first `room` due rows, more
    of them when key limits may skip some: a claim whose skipped rows ran past them comes
    back short, and the next claim tries again."""
    if room <= 0:
        return []
    due = live.filter(not_expired(now), claim_token__isnull=True, run_at__lte=now)
    rooms, fresh_room = _key_rooms(alias, queue, now, limits, held)
    limit = room if fresh_room is None else 4 * room + 64
    found = fair_turns.candidates(due, queue, fair_clock, weights, room, limit)
    full = {key for key, left in rooms.items() if left <= 0}
    taken: list[fair_turns.Candidate] = []
    per_key: Counter[str] = Counter()
    for candidate in found:
        if len(taken) == room:
            break
        key = candidate.concurrency_key
        if key is not None and fresh_room is not None:
            if key in full:
                continue
            per_key[key] += 1
            if per_key[key] >= rooms.get(key, fresh_room):
                full.add(key)
        taken.append(candidate)
    return taken


def _stamp(
    live: QuerySet[QueueMessage],
    chosen: list[Row],
    worker_id: str,
    now: datetime,
    place: dict[int, int] | None = None,
) -> list[tuple[Job, Claim]]:
    """Claim the chosen rows with one token; returns them in handout order (with `place`, a
    fair claim's: each id's place in it). The jobs are built from the rows as read and the
    stamps written, unless a row was claimed meanwhile (an unlimited claim in a process that
    has not read the limits yet): then read back."""
    if not chosen:
        return []
    token = uuid.uuid4()
    stamped = 0
    for lease, rows in itertools.groupby(
        sorted(chosen, key=lambda r: r[_LEASE_AT]), key=lambda r: r[_LEASE_AT]
    ):
        stamped += live.filter(id__in=[row[0] for row in rows], claim_token__isnull=True).update(
            attempts=F("attempts") + 1, claim_token=token, claimed_by=worker_id,
            claimed_at=now, lease_expires_at=now + timedelta(seconds=lease),
            debounce_key=None,  # the claimed job leaves its debounce key (sql/debounce_rows.py)
        )  # fmt: skip
    if stamped == len(chosen):
        claimed = [
            (*row[:4], row[4] + 1, *row[5:13], token, worker_id, now,
             now + timedelta(seconds=row[_LEASE_AT]), *row[17:])
            for row in chosen
        ]  # fmt: skip
    else:
        claimed = live_rows(live.filter(id__in=[row[0] for row in chosen], claim_token=token))
    handed = [(_rows.to_job(row, now), Claim(row[0], token)) for row in claimed]
    if place is not None:
        handed.sort(key=lambda pair: place[pair[1].id])
    else:
        handed.sort(key=lambda pair: (-pair[0].priority, pair[0].run_at, pair[0].id))
    return handed


def rate_frees_in(alias: str, queue: str, now: datetime, limits: Limits) -> float | None:
    """Seconds until the queue's rate frees room, when its window is spent (a claim that
    came back short asks); else None."""
    assert limits.rate is not None
    window = _in_window(alias, queue, limits.rate, now).filter(concurrency_key=QUEUE_WIDE)
    used = window.aggregate(total=Sum("count"))["total"] or 0
    if used < limits.rate.count:
        return None
    oldest = window.order_by("claimed_at").values_list("claimed_at", flat=True).first()
    if oldest is None:
        return None
    return max((oldest - now).total_seconds() + limits.rate.period, 0.0)


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


class OrmClaims(Dialect):
    """The claims written once here with the ORM, as methods of the dialects that take them:
    the limited claim (SQLite's and the ORM dialect's; PostgreSQL has its own) and the fair
    claim (every vendor's). A class of this module, not of sql/base.py, which this module
    imports."""

    def limited_claim(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        worker_id: str,
        n: int,
        now: datetime,
        limits: Limits,
        clock: Callable[[], datetime] | None,
    ) -> Claimed:
        return claim(self, connection, queue, worker_id, n, now, limits, clock)

    def fair_claim(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        worker_id: str,
        n: int,
        now: datetime,
        limits: Limits,
        clock: Callable[[], datetime] | None,
        weights: Mapping[str, int],
    ) -> Claimed:
        """The claim of a queue that takes turns between fair keys (sql/fair_turns.py)."""
        return claim(self, connection, queue, worker_id, n, now, limits, clock, weights)
