"""PostgreSQL: every state change is one statement, so one round trip and its own transaction.

Claims lock with FOR UPDATE SKIP LOCKED, so concurrent claimers never wait on each other and
never receive the same row. Indexes relied on are named beside each query (models.py).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import get_settings
from ..jobs import MAX_ATTEMPTS_EXCEEDED, Job, Stamps, make_job
from ..models import DEAD_LETTER_TABLE, MESSAGE_TABLE
from ..payload import decode
from .base import (
    BURIED_FIELDS,
    INSERT_FIELDS,
    KEYLESS_INSERT_FIELDS,
    Claim,
    Dialect,
    Row,
    WriteChunk,
    insert_values,
    returned_claim,
)
from .copy_rows import CopyRows
from .hot_cursor import fetch_all, ready
from .locks import POSTGRES_LOCK
from .wake_pacing import wake_due, wake_sent

#: Channel of the wake-up NOTIFY sent by enqueues (sql/wake_pacing.py says which); the payload
#: is the queue name.
NOTIFY_CHANNEL = "alkqueue"

_DEAD_AS_ROW = (
    "job_id, queue, payload, priority, attempts, max_attempts, backoff_base, lease, retention, "
    "run_at, enqueued_at, expires_at, unique_key, NULL::uuid, claimed_by, claimed_at, "
    "NULL::timestamptz, last_error, died_at, reason"
)
_BURIED = ", ".join(BURIED_FIELDS)
_CLAIMED_AS_ROW = (
    "m.id, m.payload, m.priority, m.attempts, m.max_attempts, m.backoff_base, m.lease, "
    "m.retention, m.run_at, m.enqueued_at, m.expires_at, m.unique_key, m.lease_expires_at, "
    "m.last_error"
)
_DEAD_AS_CLAIMED = (
    "job_id, payload, priority, attempts, max_attempts, backoff_base, lease, retention, "
    "run_at, enqueued_at, expires_at, unique_key, NULL::timestamptz, last_error, "
    "claimed_by, claimed_at"
)


# The enqueue of one job. The NOTIFY rides in the same statement, so it is sent exactly when
# the caller's transaction commits, and not at all on rollback.
def _insert_one(fields: Sequence[str], on_conflict: str) -> str:
    return f"""
WITH inserted AS (
    INSERT INTO {MESSAGE_TABLE} ({", ".join(fields)})
    VALUES ({", ".join(["%s"] * len(fields))}){on_conflict}
    RETURNING id
)
SELECT inserted.id FROM inserted, (SELECT pg_notify('{NOTIFY_CHANNEL}', %s)) AS wake
"""


# With a unique key: ON CONFLICT targets the partial unique index alkqueue_live_unique_key, and
# no row comes back when a live job holds the key.
_INSERT_UNIQUE = _insert_one(
    INSERT_FIELDS, "\n    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING"
)
# Without one, the row is in no unique index but the primary key's, and the statement leaves
# the column out (NULL) and ON CONFLICT with it: with ON CONFLICT every row is inserted
# speculatively, a lock on a token and a second WAL record per row, for an index it is not in.
# (One parameter fewer also keeps the two statements' signatures apart: sql/hot_cursor.py.)
_INSERT_KEYLESS = _insert_one(KEYLESS_INSERT_FIELDS, "")
# The same, when its connection notified the queue within ALKQUEUE["NOTIFY_WINDOW"]
# (sql/wake_pacing.py): no NOTIFY, so no lock held through the commit. Eleven parameters.
_INSERT_KEYLESS_QUIET = f"""
INSERT INTO {MESSAGE_TABLE} ({", ".join(KEYLESS_INSERT_FIELDS)})
VALUES ({", ".join(["%s"] * len(KEYLESS_INSERT_FIELDS))})
RETURNING id
"""

# The enqueue of many: ids first, then COPY, the fastest way into a table (no RETURNING,
# no per-row statement), then one NOTIFY; all in one transaction.
# The sequence is looked up once, in a MATERIALIZED CTE: written inside nextval() the lookup
# runs per row, and cost five times what the nextval does. The ids come back as one array,
# not a row each.
_RESERVE_IDS = f"""
WITH sequence AS MATERIALIZED (
    SELECT pg_get_serial_sequence('{MESSAGE_TABLE}', 'id')::regclass AS id
)
SELECT array_agg(nextval(sequence.id)) FROM sequence, generate_series(1, %s)
"""
_COPY = f"COPY {MESSAGE_TABLE} (id, {', '.join(INSERT_FIELDS)}) FROM STDIN"


# The claim, in one statement:
#   due     - unclaimed due rows in handout order: index alkqueue_pending_idx
#             (queue, priority DESC, run_at, id) WHERE claim_token IS NULL;
#   lapsed  - claimed rows whose lease lapsed: index alkqueue_lease_idx
#             (queue, lease_expires_at) WHERE claim_token IS NOT NULL;
#   chosen  - the best n of both, still in handout order, sorted on the keys both scans
#             read off the rows they locked (not read again: a third visit to each row
#             was a fifth of a batch claim+ack's server time);
#   claimed - stamps attempts + 1, the claim token, claimed_by and the lease;
#   buried  - lapsed rows with no attempts left go to the dead letters instead.
# The rows come back in handout order, sorted by the server, in one shape (unpacked in
# PostgresDialect.claim) that leaves out what the worker already knows: the queue, for a
# claimed row its claimed_by and claimed_at (this claim's), for a dead letter its died_at
# and reason (this claim's), and the claim token, which is the client's: one fresh random
# token per claim, shared by the jobs it hands out (see claim_params). Loading the rows'
# columns was a sixth of a draining worker's Python time, and sorting them in Python another
# share; gen_random_uuid() per row was 8% of the server's CPU per job. A dead
# letter has no lease (lease_expires_at is NULL); its last two columns are the claim it
# died in.
CLAIM = f"""
WITH due AS (
    SELECT id, priority, run_at FROM {MESSAGE_TABLE}
    WHERE queue = %(queue)s AND claim_token IS NULL AND run_at <= %(now)s
      AND (expires_at IS NULL OR expires_at > %(now)s)
    ORDER BY priority DESC, run_at, id
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), lapsed AS (
    -- Every lapsed row of the queue (few: the index holds only claimed rows), so that the
    -- best of them competes with the due rows and every exhausted one is buried.
    SELECT id, priority, run_at, attempts >= max_attempts AS exhausted FROM {MESSAGE_TABLE}
    WHERE queue = %(queue)s AND claim_token IS NOT NULL AND lease_expires_at <= %(now)s
      AND (expires_at IS NULL OR expires_at > %(now)s)
    FOR UPDATE SKIP LOCKED
), chosen AS (
    SELECT id FROM (
        SELECT id, priority, run_at FROM due
        UNION ALL
        SELECT id, priority, run_at FROM lapsed WHERE NOT exhausted
    ) AS candidates
    ORDER BY priority DESC, run_at, id
    LIMIT %(n)s
), claimed AS (
    UPDATE {MESSAGE_TABLE} m
    SET attempts = m.attempts + 1,
        claim_token = %(token)s,
        claimed_by = %(worker)s,
        claimed_at = %(now)s,
        lease_expires_at = %(now)s + make_interval(secs => m.lease)
    FROM chosen WHERE m.id = chosen.id
    RETURNING {_CLAIMED_AS_ROW}
), buried AS (
    DELETE FROM {MESSAGE_TABLE} m USING lapsed
    WHERE m.id = lapsed.id AND lapsed.exhausted
    RETURNING m.*
), dead AS (
    INSERT INTO {DEAD_LETTER_TABLE} (job_id, {_BURIED}, died_at, reason, last_error)
    SELECT id, {_BURIED}, %(now)s, %(reason)s::text, %(reason)s::text FROM buried
    RETURNING {_DEAD_AS_CLAIMED}
)
SELECT *, NULL::varchar, NULL::timestamptz FROM claimed
UNION ALL
SELECT * FROM dead
ORDER BY priority DESC, run_at, id
"""


def claim_params(
    queue: str, worker_id: str, n: int, now: datetime, token: uuid.UUID
) -> dict[str, Any]:
    """CLAIM's parameters (`make bench` EXPLAINs the statement with them too). `token` is
    the claim's: a fencing token only has to differ between two claims of one job, and a
    job is handed out at most once by one claim."""
    return {"queue": queue, "now": now, "n": n, "worker": worker_id, "token": token,
            "reason": MAX_ATTEMPTS_EXCEEDED}  # fmt: skip


# The ack's arrays go out as array literals made in one join: psycopg's list dumper runs in
# Python per element, and was a tenth of a draining worker's time. A uuid's 32 hex digits
# are valid uuid input.
def _bigint_array(ids: Iterable[int]) -> str:
    return "{" + ",".join(map(str, ids)) + "}"


def _uuid_array(tokens: Iterable[uuid.UUID]) -> str:
    return "{" + ",".join(token.hex for token in tokens) + "}"


# Acks are fenced per row by the claim token and the lease (alkqueue_message_pkey). Each
# row acked returns its claim's place in the arrays, not the claim itself: a worker acks
# hundreds at a time, and reading back a uuid per row cost more than the lookup.
_ACK = f"""
DELETE FROM {MESSAGE_TABLE} m
USING unnest(%s::bigint[], %s::uuid[]) WITH ORDINALITY AS c(id, token, place)
WHERE m.id = c.id AND m.claim_token = c.token AND m.lease_expires_at > %s
RETURNING c.place
"""

_ACK_IDS = f"""
DELETE FROM {MESSAGE_TABLE}
WHERE id = ANY(%s::bigint[]) AND queue = %s AND claim_token IS NOT NULL
  AND lease_expires_at > %s
RETURNING id
"""

_RELEASE = f"""
UPDATE {MESSAGE_TABLE}
SET claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
    run_at = %s, last_error = COALESCE(%s, last_error), attempts = attempts - %s
WHERE id = %s AND claim_token = %s AND lease_expires_at > %s
"""

# Rows locked by an atomic handler's transaction are skipped, not waited for: the keeper
# must never stall behind a running handler (the lock already keeps others off that row).
_HEARTBEAT = f"""
UPDATE {MESSAGE_TABLE} m SET lease_expires_at = c.expires
FROM unnest(%s::bigint[], %s::uuid[], %s::timestamptz[]) AS c(id, token, expires)
WHERE m.id = c.id AND m.id IN (
    SELECT id FROM {MESSAGE_TABLE}
    WHERE id = ANY(%s::bigint[]) AND claim_token IS NOT NULL AND lease_expires_at > %s
    FOR NO KEY UPDATE SKIP LOCKED
) AND m.claim_token = c.token
RETURNING m.id, m.claim_token
"""

_BURY = f"""
WITH buried AS (
    DELETE FROM {MESSAGE_TABLE} WHERE {{predicate}} RETURNING *
)
INSERT INTO {DEAD_LETTER_TABLE} (job_id, {_BURIED}, died_at, reason, last_error)
SELECT id, {_BURIED}, %s, %s, %s FROM buried
RETURNING {_DEAD_AS_ROW}
"""


# The server's own count of dead row versions (the cumulative statistics, updated within
# seconds). SKIP_LOCKED: when autovacuum is already on the table, leave it to it rather than
# wait for its lock.
_DEAD_TUPLES = (
    f"SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{MESSAGE_TABLE}'::regclass"
)
_VACUUM = f"VACUUM (SKIP_LOCKED) {MESSAGE_TABLE}"


class PostgresDialect(Dialect):
    supports_notify = True
    supports_advisory_locks = True
    session_lock = POSTGRES_LOCK
    supports_planner_estimates = True
    supports_catalog_health = True

    @contextmanager
    def insert_many(
        self, connection: BaseDatabaseWrapper, queue: str, stamps: Stamps, count: int
    ) -> Iterator[WriteChunk]:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(_RESERVE_IDS, [count])
            unused = iter(sorted(cursor.fetchone()[0]))
            rows = CopyRows(queue, stamps)
            with cursor.cursor.copy(_COPY + rows.options) as copy:

                def write(texts: Sequence[str]) -> list[int]:
                    ids = list(itertools.islice(unused, len(texts)))
                    copy.write(rows.rows(ids, texts))
                    return ids  # the server parses the chunk while the caller goes on

                if rows.header:
                    copy.write(rows.header)
                yield write
                if rows.trailer:
                    copy.write(rows.trailer)
            cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, queue])

    def insert_unique(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int | None:
        rows = fetch_all(connection, _INSERT_UNIQUE, [*insert_values(queue, text, stamps), queue])
        return int(rows[0][0]) if rows else None

    def insert_one(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int:
        assert stamps.unique_key is None
        values = insert_values(queue, text, stamps)[: len(KEYLESS_INSERT_FIELDS)]
        window = get_settings().NOTIFY_WINDOW
        if connection.connection is None:
            ready(connection)  # connection.autocommit is only known once connected
        autocommit = connection.autocommit  # fetch_all runs every check of ready() below
        if not wake_due(connection, queue, window, time.monotonic(), autocommit):
            return int(fetch_all(connection, _INSERT_KEYLESS_QUIET, values)[0][0])
        job_id = int(fetch_all(connection, _INSERT_KEYLESS, [*values, queue])[0][0])
        if autocommit:  # committed: the window starts now
            wake_sent(connection, queue, time.monotonic())
        return job_id

    def notify(self, connection: BaseDatabaseWrapper, queue: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, queue])

    def dead_tuples(self, connection: BaseDatabaseWrapper) -> int | None:
        with connection.cursor() as cursor:
            cursor.execute(_DEAD_TUPLES)
            row = cursor.fetchone()
        return None if row is None else int(row[0])

    def vacuum(self, connection: BaseDatabaseWrapper) -> None:
        with connection.cursor() as cursor:
            cursor.execute(_VACUUM)

    def claim(
        self, connection: BaseDatabaseWrapper, queue: str, worker_id: str, n: int, now: datetime
    ) -> tuple[list[tuple[Job, Claim]], list[Job]]:
        token = uuid.uuid4()
        rows = fetch_all(connection, CLAIM, claim_params(queue, worker_id, n, now, token),
                         generic_plan=True)  # fmt: skip
        handed: list[tuple[Job, Claim]] = []
        dead: list[Job] = []
        # Unpacked by position, into the Job's fields: one Job per handed-out row.
        for (
            job_id, payload, priority, attempts, max_attempts, backoff_base, lease, retention,
            run_at, enqueued_at, expires_at, unique_key, lease_expires_at, last_error,
            dead_claimed_by, dead_claimed_at,
        ) in rows:  # fmt: skip
            fields = {
                "id": job_id, "queue": queue, "payload": decode(payload), "state": "claimed",
                "priority": priority, "attempts": attempts, "max_attempts": max_attempts,
                "backoff_base": backoff_base, "lease": lease, "run_at": run_at,
                "enqueued_at": enqueued_at, "expires_at": expires_at, "unique_key": unique_key,
                "claimed_by": worker_id, "lease_expires_at": lease_expires_at,
                "last_error": last_error, "died_at": None, "claimed_at": now, "reason": None,
                "retention": retention,
            }  # fmt: skip
            if lease_expires_at is not None:
                handed.append((make_job(fields), Claim(job_id, token)))
            else:
                fields.update(state="dead", claimed_by=dead_claimed_by,
                              claimed_at=dead_claimed_at, died_at=now,
                              reason=MAX_ATTEMPTS_EXCEEDED)  # fmt: skip
                dead.append(make_job(fields))
        return handed, dead

    def ack(
        self, connection: BaseDatabaseWrapper, claims: Sequence[Claim], now: datetime
    ) -> list[Claim]:
        params = [_bigint_array(c.id for c in claims), _uuid_array(c.token for c in claims), now]
        rows = fetch_all(connection, _ACK, params, generic_plan=True)
        return [claims[place - 1] for (place,) in rows]

    def ack_ids(
        self, connection: BaseDatabaseWrapper, queue: str, ids: Sequence[int], now: datetime
    ) -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(_ACK_IDS, [list(ids), queue, now])
            return [row[0] for row in cursor.fetchall()]

    def release(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        run_at: datetime,
        error: str | None,
        refund: bool,
    ) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(_RELEASE, [run_at, error, int(refund), claim.id, claim.token, now])
            return bool(cursor.rowcount == 1)

    def heartbeat(
        self,
        connection: BaseDatabaseWrapper,
        renewals: Sequence[tuple[Claim, datetime]],
        now: datetime,
    ) -> list[Claim]:
        ids = [claim.id for claim, _ in renewals]
        tokens = [claim.token for claim, _ in renewals]
        expiries = [expires for _, expires in renewals]
        params = [ids, tokens, expiries, ids, now]
        rows = fetch_all(connection, _HEARTBEAT, params, generic_plan=True)
        return [returned_claim(row) for row in rows]

    def delete_old_dead_letters(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {DEAD_LETTER_TABLE} WHERE retention IS NOT NULL "
                "AND died_at < %s - make_interval(secs => retention)",
                [now],
            )
            return int(cursor.rowcount)

    def bury(
        self,
        connection: BaseDatabaseWrapper,
        predicate: str,
        params: Sequence[Any],
        now: datetime,
        reason: str,
        error: str,
    ) -> list[Row]:
        with connection.cursor() as cursor:
            cursor.execute(_BURY.format(predicate=predicate), [*params, now, reason, error])
            return list(cursor.fetchall())
