"""PostgreSQL's statements, each with the indexes it relies on named beside it (models.py).

Every state change is one statement, so one round trip and its own transaction. Claims lock
with FOR UPDATE SKIP LOCKED, so concurrent claimers never wait on each other and never
receive the same row.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from ...error_groups import fingerprint
from ...jobs import MAX_ATTEMPTS_EXCEEDED
from ...models import (
    DEAD_LETTER_TABLE,
    HISTORY_TABLE,
    MESSAGE_TABLE,
    SIGNAL_TABLE,
    STEP_TABLE,
)
from .. import debounce_rows
from ..base import (
    DEAD_LETTER_FIELDS,
    HISTORY_FIELDS,
    INSERT_FIELDS,
    KEYLESS_INSERT_FIELDS,
    dead_letter_values,
)
from . import NOTIFY_CHANNEL as NOTIFY_CHANNEL

_DEAD_AS_ROW = (
    "job_id, queue, payload, priority, attempts, max_attempts, backoff_base, lease, retention, "
    "run_at, enqueued_at, expires_at, unique_key, NULL::uuid, claimed_by, claimed_at, "
    "NULL::timestamptz, last_error, died_at, reason, concurrency_key, trace_context, requeued_at"
)
_DEAD_LETTER_COLUMNS = ", ".join(DEAD_LETTER_FIELDS)
# Where every dead letter is written: the claim's exhausted rows (CLAIM) and every other death
# (_DEAD_LETTER), each from the live rows its DELETE took, named `taken`.
_DEAD_LETTER_INSERT = (
    f"INSERT INTO {DEAD_LETTER_TABLE} "
    f"(job_id, {_DEAD_LETTER_COLUMNS}, died_at, reason, last_error, error_fingerprint)"
)
_CLAIMED_AS_ROW = (
    "m.id, m.payload, m.priority, m.attempts, m.max_attempts, m.backoff_base, m.lease, "
    "m.retention, m.run_at, m.enqueued_at, m.expires_at, m.unique_key, m.lease_expires_at, "
    "m.last_error, m.concurrency_key, m.trace_context, m.requeued_at"
)
_DEAD_AS_CLAIMED = (
    "job_id, payload, priority, attempts, max_attempts, backoff_base, lease, retention, "
    "run_at, enqueued_at, expires_at, unique_key, NULL::timestamptz, last_error, "
    "concurrency_key, trace_context, requeued_at, claimed_by, claimed_at"
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
INSERT_UNIQUE = _insert_one(
    INSERT_FIELDS, "\n    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING"
)
# With a debounce key: ON CONFLICT targets the partial unique index alkqueue_open_debounce_key,
# and no row comes back when an unclaimed job holds the key (sql/debounce_rows.py).
INSERT_DEBOUNCED = _insert_one(debounce_rows.FIELDS, debounce_rows.ON_CONFLICT)
# Without one, the row is in no unique index but the primary key's, and the statement leaves
# the column out (NULL) and ON CONFLICT with it: with ON CONFLICT every row is inserted
# speculatively, a lock on a token and a second WAL record per row, for an index it is not in.
# (One parameter fewer also keeps the two statements' signatures apart: session.py.)
INSERT_KEYLESS = _insert_one(KEYLESS_INSERT_FIELDS, "")
# The same, when its connection notified the queue within ALKQUEUE["NOTIFY_WINDOW"]
# (wake_pacing.py): no NOTIFY, so no lock held through the commit. Eleven parameters.
INSERT_KEYLESS_QUIET = f"""
INSERT INTO {MESSAGE_TABLE} ({", ".join(KEYLESS_INSERT_FIELDS)})
VALUES ({", ".join(["%s"] * len(KEYLESS_INSERT_FIELDS))})
RETURNING id
"""

# The enqueue of many: ids first, then COPY, the fastest way into a table (no RETURNING,
# no per-row statement), then one NOTIFY; all in one transaction.
# The sequence is looked up once, in a MATERIALIZED CTE: written inside nextval() the lookup
# would run per row, and cost more than the nextval itself. The ids come back as one array,
# not a row each.
# alkqueue_fair_key_idx: (queue, fair_key) WHERE claim_token IS NULL AND fair_key IS NOT NULL.
USES_FAIR_KEYS = f"""
SELECT EXISTS (
    SELECT 1 FROM {MESSAGE_TABLE}
    WHERE queue = %s AND fair_key IS NOT NULL AND claim_token IS NULL
)"""

RESERVE_IDS = f"""
WITH sequence AS MATERIALIZED (
    SELECT pg_get_serial_sequence('{MESSAGE_TABLE}', 'id')::regclass AS id
)
SELECT array_agg(nextval(sequence.id)) FROM sequence, generate_series(1, %s)
"""
COPY = f"COPY {MESSAGE_TABLE} (id, {', '.join(INSERT_FIELDS)}) FROM STDIN"


# The claim, in one statement:
#   due     - unclaimed due rows in handout order: index alkqueue_pending_idx
#             (queue, priority DESC, run_at, id) WHERE claim_token IS NULL;
#   lapsed  - claimed rows whose lease lapsed: index alkqueue_lease_idx
#             (queue, lease_expires_at) WHERE claim_token IS NOT NULL;
#   chosen  - the best n of both, still in handout order, sorted on the keys both scans
#             read off the rows they locked (not read again: a third visit to each row
#             is a large share of a batch claim+ack's server time);
#   claimed - stamps attempts + 1, the claim token, claimed_by and the lease;
#   taken, dead - lapsed rows with no attempts left go to the dead letters instead.
# Both find their rows by `id = ANY(ARRAY(...))` on alkqueue_message_pkey, not by a join:
# a queue table's statistics are often taken while it is empty, and under them the
# generic plan of a join walked the whole primary key once per claim, with the chosen
# rows as its inner side (one claim of 28 jobs at 11,000 rows: 160 ms, every claim).
# The rows come back in handout order, sorted by the server, in one shape (unpacked in
# PostgresDialect.claim) that leaves out what the worker already knows: the queue, for a
# claimed row its claimed_by and claimed_at (this claim's), for a dead letter its died_at
# and reason (this claim's), and the claim token, which is the client's: one fresh random
# token per claim, shared by the jobs it hands out (see claim_params): loading and sorting
# columns in Python, and a gen_random_uuid() per row on the server, cost a draining worker
# more than anything else it does per job. A dead letter has no lease (lease_expires_at is
# NULL); its last two columns are the claim it died in.
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
    -- best of them competes with the due rows and every exhausted one is dead-lettered.
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
        debounce_key = NULL,
        claimed_by = %(worker)s,
        claimed_at = %(now)s,
        lease_expires_at = %(now)s + make_interval(secs => m.lease)
    WHERE m.id = ANY(ARRAY(SELECT id FROM chosen))
    RETURNING {_CLAIMED_AS_ROW}
), taken AS (
    DELETE FROM {MESSAGE_TABLE} m
    WHERE m.id = ANY(ARRAY(SELECT id FROM lapsed WHERE exhausted))
    RETURNING m.*
), dead AS (
    {_DEAD_LETTER_INSERT}
    SELECT id, {dead_letter_values("%(now)s")}, %(now)s, %(reason)s::text, %(reason)s::text,
        %(fingerprint)s::text
    FROM taken
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
    """CLAIM's parameters (tests EXPLAIN the statement with them too). `token` is
    the claim's: a fencing token only has to differ between two claims of one job, and a
    job is handed out at most once by one claim."""
    return {"queue": queue, "now": now, "n": n, "worker": worker_id, "token": token,
            "reason": MAX_ATTEMPTS_EXCEEDED, "fingerprint": EXHAUSTED_FINGERPRINT}  # fmt: skip


#: The error group of a job whose lease lapsed with no attempt left (its error text is the
#: reason alone).
EXHAUSTED_FINGERPRINT = fingerprint(MAX_ATTEMPTS_EXCEEDED)


# The ack's arrays go out as array literals made in one join: psycopg's list dumper runs in
# Python per element, a visible share of a draining worker's time. A uuid's 32 hex digits
# are valid uuid input.
def bigint_array(ids: Iterable[int]) -> str:
    return "{" + ",".join(map(str, ids)) + "}"


_HEX = operator.attrgetter("hex")


def uuid_array(tokens: Iterable[uuid.UUID]) -> str:
    return "{" + ",".join(map(_HEX, tokens)) + "}"


# Acks are fenced per row by the claim token and the lease (alkqueue_message_pkey). Each
# row acked returns its claim's place in the arrays, not the claim itself: a worker acks
# hundreds at a time, and reading back a uuid per row costs more than the lookup. It also
# returns in_workflow: an enqueue with after= sets it under the row's lock, so a DELETE that
# waited for that lock returns the row as that enqueue committed it.
# The _PLAIN variants leave the rows marked in_workflow live: operations.ack acks those in a
# transaction with the workflow bookkeeping they need.
_ACK = f"""
DELETE FROM {MESSAGE_TABLE} m
USING unnest(%s::bigint[], %s::uuid[]) WITH ORDINALITY AS c(id, token, place)
WHERE m.id = c.id AND m.claim_token = c.token AND m.lease_expires_at > %s{{plain}}
RETURNING c.place, m.in_workflow
"""
_PLAIN = " AND NOT m.in_workflow"
ACK = _ACK.format(plain="")
ACK_PLAIN = _ACK.format(plain=_PLAIN)

# The ack of a batch holding jobs of queues that keep history: the same DELETE, and the rows
# it deleted with a keep (NULL: not kept) written to the history in the same statement, so
# in the same transaction. Each claim's place also picks its keep, duration and output. The
# insert goes to the finished day's partition, or to the default one (migration 0003_finished_jobs).
_ACK_KEEPING = f"""
WITH acked AS (
    DELETE FROM {MESSAGE_TABLE} m
    USING unnest(%s::bigint[], %s::uuid[], %s::float8[], %s::float8[], %s::text[], %s::text[])
        WITH ORDINALITY AS c(id, token, keep, duration, output, output_error, place)
    WHERE m.id = c.id AND m.claim_token = c.token AND m.lease_expires_at > %s{{plain}}
    RETURNING c.place, c.keep, c.duration, c.output, c.output_error, m.*
), kept AS (
    INSERT INTO {HISTORY_TABLE} ({", ".join(HISTORY_FIELDS)})
    SELECT id, queue, payload, priority, attempts, max_attempts, backoff_base, lease,
        unique_key, concurrency_key, last_error, enqueued_at, claimed_at, %s, duration,
        claimed_by, 'succeeded', output, output_error, %s + make_interval(secs => keep)
    FROM acked WHERE keep IS NOT NULL
)
SELECT place, in_workflow FROM acked
"""
ACK_KEEPING = _ACK_KEEPING.format(plain="")
ACK_KEEPING_PLAIN = _ACK_KEEPING.format(plain=_PLAIN)

# ack_batch: by id, whoever holds the claim, as long as its lease is live.
_ACK_BATCH = f"""
DELETE FROM {MESSAGE_TABLE} m
WHERE id = ANY(%s::bigint[]) AND queue = %s AND claim_token IS NOT NULL
  AND lease_expires_at > %s{{plain}}
RETURNING id, in_workflow
"""
ACK_BATCH = _ACK_BATCH.format(plain="")
ACK_BATCH_PLAIN = _ACK_BATCH.format(plain=_PLAIN)

# The same for a queue that keeps history: each acked row is also kept, without output.
_ACK_BATCH_KEEPING = f"""
WITH acked AS (
    DELETE FROM {MESSAGE_TABLE} m
    WHERE id = ANY(%s::bigint[]) AND queue = %s AND claim_token IS NOT NULL
      AND lease_expires_at > %s{{plain}}
    RETURNING *
), kept AS (
    INSERT INTO {HISTORY_TABLE} ({", ".join(HISTORY_FIELDS)})
    SELECT id, queue, payload, priority, attempts, max_attempts, backoff_base, lease,
        unique_key, concurrency_key, last_error, enqueued_at, claimed_at, %s, NULL,
        claimed_by, 'succeeded', NULL, NULL, %s + make_interval(secs => %s)
    FROM acked
)
SELECT id, in_workflow FROM acked
"""
ACK_BATCH_KEEPING = _ACK_BATCH_KEEPING.format(plain="")
ACK_BATCH_KEEPING_PLAIN = _ACK_BATCH_KEEPING.format(plain=_PLAIN)

# A retry keeps the attempt counted; a release (graceful shutdown) refunds it.
_UNCLAIM = f"""
UPDATE {MESSAGE_TABLE}
SET claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
    run_at = %s, last_error = COALESCE(%s, last_error){{refund}}
WHERE id = %s AND claim_token = %s AND lease_expires_at > %s
"""
# A durable step's record (docs/durable-steps.md): inserted only while the row carries the
# claim, which FOR UPDATE holds until the commit, so a reclaim waits for it or it finds the
# claim gone. The row by its primary key (or alkqueue_lease_idx, where few rows are
# claimed); the step's uniqueness by alkqueue_jobstep_name. A hot statement (prepared, its
# parameters bound on the server): a job of many steps sends it once per step.
RECORD_STEP = f"""
INSERT INTO {STEP_TABLE} (job_id, name, value, recorded_at, attempt, duration)
SELECT id, %s, %s, %s, attempts, %s FROM {MESSAGE_TABLE}
WHERE id = %s AND claim_token = %s AND lease_expires_at > %s
FOR UPDATE
RETURNING job_id
"""
# The steps of a claim's jobs, read when the first of them asks (worker/step_records.py):
# the jobs still validly claimed by alkqueue_message_pkey (or alkqueue_lease_idx, where few
# rows are claimed), each one's steps by alkqueue_jobstep_name's leading job_id; a job
# without steps comes as one row with no name. Ids and tokens are matched each on its own,
# and each row's token is returned: the client keeps the rows that carry their own claim.
LOAD_CLAIMED_STEPS = f"""
SELECT m.id, m.claim_token, s.name, s.value
FROM {MESSAGE_TABLE} m LEFT JOIN {STEP_TABLE} s ON s.job_id = m.id
WHERE m.id = ANY(%s::bigint[]) AND m.claim_token = ANY(%s::uuid[]) AND m.lease_expires_at > %s
"""
# An ack's delete of its jobs' steps and signals (alkqueue_jobstep_name and
# alkqueue_jobsignal_name, by their leading job_id): the ids as one array literal, where an
# IN list of thousands of marks (a drain of woken sleepers) cost the client more than the
# server, parsed and quoted mark by mark.
DELETE_SIGNALS_OF = f"DELETE FROM {SIGNAL_TABLE} WHERE job_id = ANY(%s::bigint[])"
DELETE_STEPS_OF = f"DELETE FROM {STEP_TABLE} WHERE job_id = ANY(%s::bigint[])"
RETRY = _UNCLAIM.format(refund="")
# A claim its worker lost by dying of an error while the handler ran: the attempt counted,
# and the crash (the job dies instead at the limit: CRASHED_DEAD, run first).
CRASHED = _UNCLAIM.format(refund=", crashes = crashes + 1")
RELEASE = _UNCLAIM.format(refund=", attempts = attempts - 1")
# A snooze is a release to a later run_at.
SNOOZE = RELEASE

# Rows locked by an atomic handler's transaction are skipped, not waited for: a heartbeat
# must never stall behind a running handler (the lock already keeps others off that row).
# The locking read is a CTE, run once: as an IN (subquery) the planner, misled by a table's
# stale statistics, re-ran it for every row of the table, and one heartbeat of 2,000 prefetched
# jobs took minutes while the acker's DELETE waited on its row locks (docs/benchmarks.md,
# "Fast by default").
HEARTBEAT = f"""
WITH locked AS (
    SELECT id FROM {MESSAGE_TABLE}
    WHERE id = ANY(%s::bigint[]) AND claim_token IS NOT NULL AND lease_expires_at > %s
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {MESSAGE_TABLE} m SET lease_expires_at = c.expires
FROM unnest(%s::bigint[], %s::uuid[], %s::timestamptz[]) AS c(id, token, expires), locked
WHERE m.id = c.id AND m.id = locked.id AND m.claim_token = c.token
RETURNING m.id, m.claim_token
"""

# The same, writing running jobs' progress as well (docs/running-jobs.md): a NULL progress_at
# in the arrays leaves that row's progress as it was. Used only on ticks with progress to
# write, so the plain heartbeat keeps its three arrays.
HEARTBEAT_WITH_PROGRESS = f"""
WITH locked AS (
    SELECT id FROM {MESSAGE_TABLE}
    WHERE id = ANY(%s::bigint[]) AND claim_token IS NOT NULL AND lease_expires_at > %s
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {MESSAGE_TABLE} m SET lease_expires_at = c.expires,
    progress = CASE WHEN c.progress_at IS NULL THEN m.progress ELSE c.progress END,
    progress_at = COALESCE(c.progress_at, m.progress_at)
FROM unnest(%s::bigint[], %s::uuid[], %s::timestamptz[], %s::text[], %s::timestamptz[])
    AS c(id, token, expires, progress, progress_at), locked
WHERE m.id = c.id AND m.id = locked.id AND m.claim_token = c.token
RETURNING m.id, m.claim_token
"""

# Live rows to the dead letters in one statement, with the error text's group
# (error_groups.py): PostgresDialect.dead_letter, its parameters the predicate's, then the
# time of death twice (a waiting job's run_at, then died_at), the reason, the error and its
# group. Each use names its rows' index.
_DEAD_LETTER = f"""
WITH taken AS (
    DELETE FROM {MESSAGE_TABLE} WHERE {{predicate}} RETURNING *
)
{_DEAD_LETTER_INSERT}
SELECT id, {dead_letter_values("%s")}, %s, %s, %s, %s FROM taken
RETURNING {_DEAD_AS_ROW}
"""
# dead_letter: live rows by id (alkqueue_message_pkey).
DEAD_LETTER_BY_ID = _DEAD_LETTER.format(predicate="id = ANY(%s::bigint[])")
# fail: one validly claimed job (alkqueue_message_pkey).
FAIL_PREDICATE = "id = %s AND claim_token = %s AND lease_expires_at > %s"
FAIL = _DEAD_LETTER.format(predicate=FAIL_PREDICATE)
# crashed: one validly claimed job at its last crash (alkqueue_message_pkey).
CRASHED_DEAD = _DEAD_LETTER.format(predicate=FAIL_PREDICATE + " AND crashes + 1 >= %s")
# sweep_expired: expired jobs in any state, of one queue or of all (alkqueue_expiry_idx).
SWEEP_EXPIRED_IN_QUEUE = _DEAD_LETTER.format(predicate="queue = %s AND expires_at <= %s")
SWEEP_EXPIRED = _DEAD_LETTER.format(predicate="expires_at <= %s")
# reclaim: lapsed claims with no attempts left die (alkqueue_lease_idx) ...
RECLAIM_EXHAUSTED = _DEAD_LETTER.format(
    predicate="claim_token IS NOT NULL AND lease_expires_at <= %s AND attempts >= max_attempts"
)
# ... and the others go back to pending (alkqueue_lease_idx).
RECLAIM = f"""
UPDATE {MESSAGE_TABLE} SET claim_token = NULL, claimed_by = NULL, claimed_at = NULL,
    lease_expires_at = NULL
WHERE claim_token IS NOT NULL AND lease_expires_at <= %s AND attempts < max_attempts
RETURNING id
"""
DELETE_OLD_DEAD_LETTERS = f"""
DELETE FROM {DEAD_LETTER_TABLE} WHERE retention IS NOT NULL
  AND died_at < %s - make_interval(secs => retention)
"""


# The server's own count of dead row versions (the cumulative statistics, updated within
# seconds). SKIP_LOCKED: when autovacuum is already on the table, leave it to it rather than
# wait for its lock.
DEAD_TUPLES = (
    f"SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{MESSAGE_TABLE}'::regclass"
)
VACUUM = f"VACUUM (SKIP_LOCKED) {MESSAGE_TABLE}"
# Whether the planner's size of the live table says empty (reltuples 0 on pages a VACUUM
# could not truncate) while the server counts live rows in it: the planner then takes the
# table for one row whatever it holds, and the ack's join walks the whole primary key once
# per ack (docs/worker.md, "Inside a worker process"). ANALYZE sets the size again.
STATISTICS_SAY_EMPTY = f"""
SELECT c.reltuples = 0 AND c.relpages > 0 AND s.n_live_tup > 0
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = '{MESSAGE_TABLE}'::regclass
"""
ANALYZE = f"ANALYZE (SKIP_LOCKED) {MESSAGE_TABLE}"
# The oldest transaction id a VACUUM of the live table must keep rows for: the snapshot
# (backend_xmin) or transaction (backend_xid) of another session of this database, a
# replication slot's xmin or a prepared transaction. Compared with the last VACUUM's for
# equality only, so xid wraparound does not matter; NULL when nothing else is open.
VACUUM_HORIZON = """
SELECT x::text FROM (
    SELECT backend_xmin AS x FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL
    UNION ALL
    SELECT backend_xid FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL
    UNION ALL
    SELECT xmin FROM pg_replication_slots WHERE xmin IS NOT NULL
    UNION ALL
    SELECT transaction FROM pg_prepared_xacts
) AS holders
ORDER BY age(x) DESC LIMIT 1
"""
# The same count for each of the tables named by the parameter (a text array), a
# partitioned table's partitions summed into its own figure (the history's day
# partitions come and go; one series per day would churn). The names are resolved through
# the search path, as Django's unqualified names are; a missing table is left out.
TABLE_DEAD_TUPLES = """
SELECT COALESCE(i.inhparent, s.relid)::regclass::text, SUM(s.n_dead_tup)::bigint
FROM pg_stat_user_tables s
LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
WHERE COALESCE(i.inhparent, s.relid) IN (SELECT to_regclass(t) FROM unnest(%s::text[]) t)
GROUP BY 1
"""
