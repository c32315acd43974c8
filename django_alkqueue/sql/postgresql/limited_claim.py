"""PostgreSQL's claim of a queue with limits (docs/flow-control.md): the gate of
sql/limited_claim.py, then that claim's count and choice in one statement (LIMITED_CHOOSE)
and its stamp and record in another (LIMITED_STAMP). The gate and the choice go out in one
pipeline: with the transaction's BEGIN, one round trip.

The choice runs after the gate's UPDATE has returned, so its snapshot (READ COMMITTED: one
per statement) is taken with the gate held and sees every claim committed by the gate's
previous holders: the same argument as the ORM claim's, with one snapshot for all the counts.
A gate in the same statement would not do: a statement that waits for a row lock keeps the
snapshot it took before waiting.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ...jobs import Job, make_job
from ...limit_values import Limits
from ...models import CLAIM_GATE_TABLE, CLAIM_LEDGER_TABLE, MESSAGE_TABLE, QueueMessage
from ...payload import decode
from .. import limited_claim as gate
from ..base import Claim, Claimed, Dialect
from .session import fetch_all, fetch_each
from .statements import bigint_array

# The gate of sql/limited_claim.lock_gate, when the queue's row is there already (by its
# unique index on queue, alkqueue_claimgate_queue_key); no row back: the queue's first
# limited claim, which makes it.
LOCK_GATE = f"UPDATE {CLAIM_GATE_TABLE} SET claimed_at = %s WHERE queue = %s RETURNING 1"

# A limited claim once its gate is held, in two round trips: LIMITED_CHOOSE counts and
# chooses, then the claim reads its clock (its claimed_at, never earlier than the counts'
# snapshot: docs/flow-control.md, "Why the measured intervals stay under the cap") and
# LIMITED_STAMP stamps and records.
#   held      - live claims per key (NULL: jobs without one) and how many lapsed
#               (alkqueue_lease_idx (queue, lease_expires_at) WHERE claim_token IS NOT NULL).
#               Lapsed claims count until they are reclaimed (rule 1): the caller reclaims
#               them after the stamp and claims again for the room they held;
#   used      - key_rate: each key's claims within its window (alkqueue_claimledger_idx
#               (queue, concurrency_key, claimed_at)); none without key_rate (key_since NULL);
#   keys      - the room each key with live claims or ledger rows has left;
#   room      - what concurrency and rate (the ledger's "" rows, same index) leave, at most n;
#   candidates- due rows in handout order (alkqueue_pending_idx (queue, priority DESC,
#               run_at, id) WHERE claim_token IS NULL), leaving out the keys with no room
#               (NOT IN: one hashed lookup per row, however many keys are full),
#               one page of them: the caller asks again with a larger page when the page was
#               full and the room is not used (rows of one key beyond its room);
#   chosen    - each key's first rows up to its room, then the first `room` of those.
# The first row carries the lapsed count, the candidates seen and the queue-wide room, with
# the first chosen id, or NULL when none was chosen.
LIMITED_CHOOSE = f"""
WITH held AS (
    SELECT concurrency_key, count(*) AS n,
           count(*) FILTER (WHERE lease_expires_at <= %(now)s) AS lapsed
    FROM {MESSAGE_TABLE}
    WHERE queue = %(queue)s AND claim_token IS NOT NULL
    GROUP BY concurrency_key
), used AS (
    SELECT concurrency_key, sum(count) AS n FROM {CLAIM_LEDGER_TABLE}
    WHERE queue = %(queue)s AND concurrency_key <> '' AND claimed_at > %(key_since)s::timestamptz
    GROUP BY concurrency_key
), keys AS (
    SELECT concurrency_key,
           LEAST(%(key_concurrency)s::bigint - coalesce(held.n, 0),
                 %(key_rate)s::bigint - coalesce(used.n, 0))::bigint AS room
    FROM held FULL JOIN used USING (concurrency_key)
    WHERE concurrency_key IS NOT NULL
), room AS (
    SELECT greatest(LEAST(
        %(n)s::bigint,
        %(concurrency)s::bigint - (SELECT coalesce(sum(n), 0) FROM held),
        %(rate)s::bigint - (
            SELECT coalesce(sum(count), 0) FROM {CLAIM_LEDGER_TABLE}
            WHERE queue = %(queue)s AND concurrency_key = ''
              AND claimed_at > %(since)s::timestamptz
        )
    ), 0)::bigint AS n
), candidates AS (
    SELECT m.id, m.priority, m.run_at, m.concurrency_key FROM {MESSAGE_TABLE} m
    WHERE m.queue = %(queue)s AND m.claim_token IS NULL AND m.run_at <= %(now)s
      AND (m.expires_at IS NULL OR m.expires_at > %(now)s)
      AND (SELECT n FROM room) > 0
      AND (m.concurrency_key IS NULL OR m.concurrency_key NOT IN (
          SELECT concurrency_key FROM keys WHERE room <= 0
      ))
    ORDER BY m.priority DESC, m.run_at, m.id
    LIMIT %(page)s
), chosen AS (
    SELECT ranked.id FROM (
        SELECT c.*, row_number() OVER (
            PARTITION BY c.concurrency_key ORDER BY c.priority DESC, c.run_at, c.id
        ) AS nth
        FROM candidates c
    ) AS ranked LEFT JOIN keys USING (concurrency_key)
    WHERE ranked.concurrency_key IS NULL
       OR ranked.nth <= coalesce(keys.room, LEAST(%(key_concurrency)s::bigint,
                                                   %(key_rate)s::bigint), ranked.nth)
    ORDER BY ranked.priority DESC, ranked.run_at, ranked.id
    LIMIT (SELECT n FROM room)
)
SELECT (SELECT coalesce(sum(lapsed), 0) FROM held)::bigint,
       (SELECT count(*) FROM candidates), (SELECT n FROM room), chosen.id
FROM (SELECT 1) AS one LEFT JOIN chosen ON true
"""

# The stamp of the chosen rows, by primary key (alkqueue_message_pkey): a row an unlimited
# claim took meanwhile (a process that has not read the limits yet) is left out by
# `claim_token IS NOT DISTINCT FROM NULL::uuid`: IS NULL itself, written so that it no
# longer matches the claim index's predicate. With it, under statistics taken while the
# table was empty, alkqueue_pending_idx looked as cheap as the primary key and every stamp
# walked it whole (tests/test_flow_control.py). The ledger gets the claim's rows for rate
# (key "") and key_rate, and forgets the rows no window counts any more
# (alkqueue_claimledger_idx).
LIMITED_STAMP = f"""
WITH claimed AS (
    UPDATE {MESSAGE_TABLE} m
    SET attempts = m.attempts + 1,
        claim_token = %(token)s,
        debounce_key = NULL,
        claimed_by = %(worker)s,
        claimed_at = %(now)s,
        lease_expires_at = %(now)s + make_interval(secs => m.lease)
    WHERE m.id = ANY(%(ids)s::bigint[]) AND m.claim_token IS NOT DISTINCT FROM NULL::uuid
    RETURNING m.id, m.payload, m.priority, m.attempts, m.max_attempts, m.backoff_base,
              m.lease, m.retention, m.run_at, m.enqueued_at, m.expires_at, m.unique_key,
              m.lease_expires_at, m.last_error, m.concurrency_key, m.trace_context,
              m.requeued_at
), counted AS (
    INSERT INTO {CLAIM_LEDGER_TABLE} (queue, concurrency_key, claimed_at, count)
    SELECT %(queue)s, '', %(now)s, count(*) FROM claimed
    HAVING count(*) > 0 AND %(rate)s::bigint IS NOT NULL
    UNION ALL
    SELECT %(queue)s, concurrency_key, %(now)s, count(*) FROM claimed
    WHERE concurrency_key IS NOT NULL AND %(key_rate)s::bigint IS NOT NULL
    GROUP BY concurrency_key
), forgotten AS (
    DELETE FROM {CLAIM_LEDGER_TABLE}
    WHERE queue = %(queue)s AND claimed_at <= %(forget_until)s::timestamptz
)
SELECT * FROM claimed
"""


def choose_params(queue: str, n: int, now: datetime, limits: Limits, page: int) -> dict[str, Any]:
    """LIMITED_CHOOSE's parameters (tests EXPLAIN the statement with them too)."""
    rate, key_rate = limits.rate, limits.key_rate
    return {
        "queue": queue, "now": now, "n": n, "page": page,
        "concurrency": limits.concurrency, "key_concurrency": limits.key_concurrency,
        "rate": None if rate is None else rate.count,
        "since": None if rate is None else now - timedelta(seconds=rate.period),
        "key_rate": None if key_rate is None else key_rate.count,
        "key_since": None if key_rate is None else now - timedelta(seconds=key_rate.period),
    }  # fmt: skip


def stamp_params(
    queue: str, worker_id: str, ids: list[int], now: datetime, limits: Limits, token: uuid.UUID
) -> dict[str, Any]:
    """LIMITED_STAMP's parameters."""
    rate, key_rate = limits.rate, limits.key_rate
    periods = [r.period for r in (rate, key_rate) if r is not None]
    return {
        "queue": queue, "now": now, "worker": worker_id, "token": token,
        "ids": bigint_array(ids),
        "rate": None if rate is None else rate.count,
        "key_rate": None if key_rate is None else key_rate.count,
        "forget_until": now - timedelta(seconds=max(periods)) if periods else None,
    }  # fmt: skip


def claim(
    dialect: Dialect,
    connection: BaseDatabaseWrapper,
    queue: str,
    worker_id: str,
    n: int,
    now: datetime,
    limits: Limits,
    clock: Callable[[], datetime] | None = None,
) -> Claimed:
    """sql/limited_claim.claim's contract, in three statements and a commit: the gate,
    LIMITED_CHOOSE and LIMITED_STAMP (again, for a larger page or after reclaiming lapsed
    claims, when that left room unused). The gate and the first LIMITED_CHOOSE go out
    together (`choose_behind_gate`)."""
    alias = connection.alias
    token = uuid.uuid4()
    handed: list[tuple[Job, Claim]] = []
    dead: list[Job] = []
    room_in = None
    with transaction.atomic(using=alias):
        page = 2 * n + 16
        counted_at, rows = choose_behind_gate(connection, queue, n, now, clock, limits, page)
        while True:
            want = n - len(handed)
            lapsed, seen, room = rows[0][0], rows[0][1], rows[0][2]
            ids = [row[3] for row in rows if row[3] is not None]
            if ids:
                claimed_at = max(counted_at, read(now, clock))
                params = stamp_params(queue, worker_id, ids, claimed_at, limits, token)
                stamped = fetch_all(connection, LIMITED_STAMP, params)
                handed.extend(_job(queue, worker_id, claimed_at, token, row) for row in stamped)
            if lapsed:  # they held their slots until now: free them, and look again
                live = QueueMessage.objects.using(alias).filter(queue=queue)
                dead.extend(gate.reclaim_lapsed(dialect, connection, live, counted_at))
            elif len(ids) == want or seen < page:
                break  # the room is used, or every eligible row was seen
            if len(handed) >= n:
                break
            page *= 2
            params = choose_params(queue, n - len(handed), counted_at, limits, page)
            rows = fetch_all(connection, LIMITED_CHOOSE, params)
        if limits.rate is not None and len(handed) < n:
            room_in = gate.rate_frees_in(alias, queue, read(now, clock), limits)
    handed.sort(key=lambda pair: (-pair[0].priority, pair[0].run_at, pair[0].id))
    held_back = gate.was_held_back(limits, len(handed) < n, room < want)  # the last choice's
    return Claimed(handed, dead, held_back, room_in)


def choose_behind_gate(
    connection: BaseDatabaseWrapper,
    queue: str,
    n: int,
    now: datetime,
    clock: Callable[[], datetime] | None,
    limits: Limits,
    page: int,
) -> tuple[datetime, list[tuple[Any, ...]]]:
    """Take the queue's gate and run the first LIMITED_CHOOSE behind it, in one round trip:
    the server runs the choice once the gate's UPDATE has returned, on a snapshot taken
    then. Its time (the counts' `now`) is read before the gate is asked for, so it may be
    earlier than sql/limited_claim.py's; an earlier time only counts more: each rate's window
    reaches further back, a lease lapsing meanwhile still holds its slot, and a job coming
    due meanwhile waits for the next claim. The queue's first limited claim makes its gate
    row first (sql/limited_claim.lock_gate) and chooses again behind it.

    Returns the counts' time and LIMITED_CHOOSE's rows."""
    counted_at = read(now, clock)
    params = choose_params(queue, n, counted_at, limits, page)
    locked, rows = fetch_each(connection, [(LOCK_GATE, [now, queue]), (LIMITED_CHOOSE, params)])
    if not locked:
        gate.lock_gate(connection.alias, queue, now)
        counted_at = read(now, clock)
        params = choose_params(queue, n, counted_at, limits, page)
        rows = fetch_all(connection, LIMITED_CHOOSE, params)
    return counted_at, rows


def read(now: datetime, clock: Callable[[], datetime] | None) -> datetime:
    """The clock, never earlier than `now`."""
    return now if clock is None else max(now, clock())


def _job(
    queue: str, worker_id: str, now: datetime, token: uuid.UUID, row: tuple[Any, ...]
) -> tuple[Job, Claim]:
    (
        job_id, payload, priority, attempts, max_attempts, backoff_base, lease, retention,
        run_at, enqueued_at, expires_at, unique_key, lease_expires_at, last_error,
        concurrency_key, trace_context, requeued_at,
    ) = row  # fmt: skip
    fields = {
        "id": job_id, "queue": queue, "payload": decode(payload), "state": "claimed",
        "priority": priority, "attempts": attempts, "max_attempts": max_attempts,
        "backoff_base": backoff_base, "lease": lease, "run_at": run_at,
        "enqueued_at": enqueued_at, "expires_at": expires_at, "unique_key": unique_key,
        "claimed_by": worker_id, "lease_expires_at": lease_expires_at,
        "last_error": last_error, "died_at": None, "claimed_at": now, "reason": None,
        "retention": retention, "concurrency_key": concurrency_key,
        "trace_context": trace_context, "requeued_at": requeued_at,
    }  # fmt: skip
    return make_job(fields), Claim(job_id, token)
