"""SQLite: the embedded default. SQLite has one writer at a time, so a claim is safe when its
transaction takes the write lock before it reads: every multi-statement change here starts
with a write (a DELETE that may match nothing still takes the lock), never read-then-write.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.dateparse import parse_datetime

from ..error_groups import fingerprint
from ..jobs import CRASHED_ITS_WORKER, MAX_ATTEMPTS_EXCEEDED, HistoryEntry, Job, Progress, Stamps
from ..models import DEAD_LETTER_TABLE, HISTORY_TABLE, MESSAGE_TABLE, STEP_TABLE
from . import debounce_rows, limited_claim
from .base import (
    BY_CLAIM,
    DEAD_COLUMNS,
    DEAD_LETTER_FIELDS,
    HISTORY_FIELDS,
    INSERT_FIELDS,
    KEYLESS_INSERT_FIELDS,
    LIVE_ROW,
    ROW_FIELDS,
    Acked,
    Claim,
    CrashRetry,
    Row,
    WriteChunk,
    chunked,
    dead_letter_values,
    insert_values,
    returned_claim,
)

_TOKEN_AT = ROW_FIELDS.index("claim_token")
_INSERT_CHUNK = 500
_ROW_FROM_LIVE = LIVE_ROW
_DEAD_LETTER_COLUMNS = ", ".join(DEAD_LETTER_FIELDS)

_INSERT = f"""
INSERT INTO {MESSAGE_TABLE} ({", ".join(INSERT_FIELDS)})
VALUES {{values}}
ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
RETURNING id
"""

# Without a unique key (the one-job enqueue): the column left out (NULL), and ON CONFLICT with
# it, as PostgreSQL's INSERT_KEYLESS does.
_INSERT_KEYLESS = f"""
INSERT INTO {MESSAGE_TABLE} ({", ".join(KEYLESS_INSERT_FIELDS)})
VALUES ({", ".join(["%s"] * len(KEYLESS_INSERT_FIELDS))})
RETURNING id
"""

# With a debounce key (sql/debounce_rows.py): index alkqueue_open_debounce_key.
_INSERT_DEBOUNCED = f"""
INSERT INTO {MESSAGE_TABLE} ({", ".join(debounce_rows.FIELDS)})
VALUES ({", ".join(["%s"] * len(debounce_rows.FIELDS))}){debounce_rows.ON_CONFLICT}
RETURNING id
"""

# The claimable rows of one queue, each half through its own index and in handout order, so
# that a claim reads at most n rows of each however deep the queue is (one query with an OR
# of the two halves made SQLite read and sort the queue's whole pending range).
# Due, unclaimed rows: index alkqueue_pending_idx (queue, priority DESC, run_at, id).
_DUE = f"""
SELECT id, lease, priority, run_at FROM {MESSAGE_TABLE}
WHERE queue = %s AND claim_token IS NULL AND run_at <= %s
  AND (expires_at IS NULL OR expires_at > %s)
ORDER BY priority DESC, run_at, id
LIMIT %s
"""
# Claimed rows whose lease lapsed: index alkqueue_lease_idx (queue, lease_expires_at).
_LAPSED = f"""
SELECT id, lease, priority, run_at FROM {MESSAGE_TABLE}
WHERE queue = %s AND claim_token IS NOT NULL AND lease_expires_at <= %s
  AND (expires_at IS NULL OR expires_at > %s)
ORDER BY priority DESC, run_at, id
LIMIT %s
"""
# Anything for a claim to do (a due row, or a lapsed one to reclaim or dead-letter)? Read before the
# write lock is taken: an idle poll then costs no lock, and a claim does not wait behind a
# writer's open transaction (an enqueue inside the caller's atomic block) to find nothing.
_ANY_CLAIMABLE = f"""
SELECT EXISTS (
    SELECT 1 FROM {MESSAGE_TABLE}
    WHERE queue = %s AND claim_token IS NULL AND run_at <= %s
      AND (expires_at IS NULL OR expires_at > %s)
) OR EXISTS (
    SELECT 1 FROM {MESSAGE_TABLE}
    WHERE queue = %s AND claim_token IS NOT NULL AND lease_expires_at <= %s
)
"""

# The claim's stamp of its chosen rows: one statement for them all (UPDATE ... FROM, SQLite
# 3.33+), each row with its own token and its own lease's end from the VALUES list (column1:
# the id, by the primary key; column2: the token; column3: the lease's end).
_STAMP_CLAIM = f"""
UPDATE {MESSAGE_TABLE}
SET attempts = attempts + 1, claim_token = chosen.column2, claimed_by = %s, claimed_at = %s,
    lease_expires_at = chosen.column3, debounce_key = NULL
FROM (VALUES {{rows}}) AS chosen
WHERE {MESSAGE_TABLE}.id = chosen.column1
RETURNING {_ROW_FROM_LIVE}
"""
#: Rows per claim stamp: three bound parameters each, under SQLite's limit of 999 in all.
_STAMP_CHUNK = 300

# A durable step's record (docs/durable-steps.md): one statement, which takes the write lock,
# so no reclaim comes between its check of the claim and its insert. The row by its primary
# key; the step's uniqueness by alkqueue_jobstep_name.
_RECORD_STEP = f"""
INSERT INTO {STEP_TABLE} (job_id, name, value, recorded_at, attempt, duration)
SELECT id, %s, %s, %s, attempts, %s FROM {MESSAGE_TABLE} WHERE {BY_CLAIM}
"""

# Row values: one statement for the whole batch, each row fenced by its own token.
_ACK = f"""
DELETE FROM {MESSAGE_TABLE}
WHERE (id, claim_token) IN (VALUES {{pairs}}) AND lease_expires_at > %s{{plain}}
RETURNING id, claim_token, in_workflow
"""
# The ack of jobs whose queues keep history returns what their history rows copy
# (sql/base.py HISTORY_FIELDS), and _KEEP writes them in the ack's transaction. Every ack
# returns in_workflow last (Acked: the workflow bookkeeping in the same transaction); with
# `plain` (_PLAIN_ONLY) they leave the rows marked in_workflow live.
_ACK_KEEPING = f"""
DELETE FROM {MESSAGE_TABLE}
WHERE (id, claim_token) IN (VALUES {{pairs}}) AND lease_expires_at > %s{{plain}}
RETURNING id, claim_token, queue, payload, priority, attempts, max_attempts, backoff_base,
    lease, unique_key, concurrency_key, last_error, enqueued_at, claimed_at, claimed_by,
    in_workflow
"""
_PLAIN_ONLY = " AND NOT in_workflow"
_KEEP = f"""
INSERT INTO {HISTORY_TABLE} ({", ".join(HISTORY_FIELDS)})
VALUES ({", ".join(["%s"] * len(HISTORY_FIELDS))})
"""
_ACK_BATCH_KEEPING = f"""
DELETE FROM {MESSAGE_TABLE} WHERE id IN ({{marks}}) AND queue = %s
  AND claim_token IS NOT NULL AND lease_expires_at > %s{{plain}}
RETURNING id, claim_token, queue, payload, priority, attempts, max_attempts, backoff_base,
    lease, unique_key, concurrency_key, last_error, enqueued_at, claimed_at, claimed_by,
    in_workflow
"""
_ACK_BATCH = f"""
DELETE FROM {MESSAGE_TABLE} WHERE id IN ({{marks}}) AND queue = %s
  AND claim_token IS NOT NULL AND lease_expires_at > %s{{plain}}
RETURNING id, in_workflow
"""

# A retry keeps the attempt counted; a release (graceful shutdown) refunds it.
_UNCLAIM = f"""
UPDATE {MESSAGE_TABLE}
SET claim_token = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL,
    run_at = %s, last_error = COALESCE(%s, last_error){{refund}}
WHERE id = %s AND claim_token = %s AND lease_expires_at > %s
"""
_RETRY = _UNCLAIM.format(refund="")
# A claim its worker lost by dying of an error while the handler ran (Dialect.crashed).
_CRASHED = _UNCLAIM.format(refund=", crashes = crashes + 1")
_RELEASE = _UNCLAIM.format(refund=", attempts = attempts - 1")
# A snooze is a release to a later run_at.
_SNOOZE = _RELEASE

# Which live rows go to the dead letters, for each transition that moves them there.

_EXPIRED_IN_QUEUE = "queue = %s AND expires_at <= %s"
_EXPIRED = "expires_at <= %s"
_LAPSED_EXHAUSTED_IN_QUEUE = (
    "queue = %s AND claim_token IS NOT NULL AND lease_expires_at <= %s "
    "AND attempts >= max_attempts AND (expires_at IS NULL OR expires_at > %s)"
)
_LAPSED_EXHAUSTED = (
    "claim_token IS NOT NULL AND lease_expires_at <= %s AND attempts >= max_attempts"
)
# Lapsed claims with attempts left go back to pending (index alkqueue_lease_idx).
_RECLAIM = f"""
UPDATE {MESSAGE_TABLE} SET claim_token = NULL, claimed_by = NULL, claimed_at = NULL,
    lease_expires_at = NULL
WHERE claim_token IS NOT NULL AND lease_expires_at <= %s AND attempts < max_attempts
RETURNING id
"""

_HEARTBEAT = f"""
UPDATE {MESSAGE_TABLE} SET lease_expires_at = %s
WHERE id = %s AND claim_token = %s AND lease_expires_at > %s
RETURNING id, claim_token
"""
# The same, writing the running job's progress too (docs/running-jobs.md).
_HEARTBEAT_WITH_PROGRESS = f"""
UPDATE {MESSAGE_TABLE} SET lease_expires_at = %s, progress = %s, progress_at = %s
WHERE id = %s AND claim_token = %s AND lease_expires_at > %s
RETURNING id, claim_token
"""

# A dead letter: the live rows taken, then their dead letters written (SqliteDialect.dead_letter);
# the parameters the predicate's, then the time of death (a waiting job's run_at).
_TAKE_FOR_DEAD_LETTER = (
    f"DELETE FROM {MESSAGE_TABLE} WHERE {{predicate}} RETURNING id, {dead_letter_values('%s')}"
)

_INSERT_DEAD = f"""
INSERT INTO {DEAD_LETTER_TABLE}
    (job_id, {_DEAD_LETTER_COLUMNS}, died_at, reason, last_error, error_fingerprint)
VALUES ({", ".join(["%s"] * (len(DEAD_LETTER_FIELDS) + 5))})
"""


def file_journal_mode(connection: BaseDatabaseWrapper) -> str | None:
    """The journal mode of the SQLite database `connection` opens ("wal", "delete", ...;
    "memory" for an in-memory one); None for any other database."""
    if connection.vendor != "sqlite":
        return None
    name = str(connection.settings_dict["NAME"])
    if name in ("", ":memory:") or "mode=memory" in name:
        return "memory"
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        return str(cursor.fetchone()[0]).lower()


class SqliteDialect(debounce_rows.UpdateInPlace, limited_claim.OrmClaims):
    supports_update_returning = True

    def param_datetime(self, connection: BaseDatabaseWrapper, value: datetime | None) -> Any:
        return connection.ops.adapt_datetimefield_value(value)

    def param_token(self, token: uuid.UUID) -> Any:
        return token.hex

    def read_datetime(self, value: Any) -> datetime | None:
        if value is None:
            return None
        parsed = value if isinstance(value, datetime) else parse_datetime(value)
        if parsed is not None and settings.USE_TZ and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed

    def read_token(self, value: Any) -> uuid.UUID | None:
        return None if value is None else uuid.UUID(value)

    @contextmanager
    def insert_many(
        self, connection: BaseDatabaseWrapper, queue: str, stamps: Stamps, count: int
    ) -> Iterator[WriteChunk]:
        placeholders = "(" + ", ".join(["%s"] * len(INSERT_FIELDS)) + ")"
        # Every column after queue and payload, the same in each row: bound once.
        stamped = [self._param(connection, v) for v in insert_values(queue, "", stamps)][2:]
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:

            def write(texts: Sequence[str]) -> list[int]:
                ids: list[int] = []
                for start in range(0, len(texts), _INSERT_CHUNK):
                    chunk = texts[start : start + _INSERT_CHUNK]
                    params = [value for text in chunk for value in (queue, text, *stamped)]
                    sql = _INSERT.format(values=", ".join([placeholders] * len(chunk)))
                    cursor.execute(sql, params)
                    # RETURNING order is unspecified; rowids grow in insertion order.
                    ids.extend(sorted(row[0] for row in cursor.fetchall()))
                return ids

            yield write

    def insert_one(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int:
        assert stamps.unique_key is None
        values = insert_values(queue, text, stamps)[: len(KEYLESS_INSERT_FIELDS)]
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_KEYLESS, [self._param(connection, v) for v in values])
            return int(cursor.fetchone()[0])

    def insert_unique(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int | None:
        placeholders = "(" + ", ".join(["%s"] * len(INSERT_FIELDS)) + ")"
        params = [self._param(connection, v) for v in insert_values(queue, text, stamps)]
        with connection.cursor() as cursor:
            cursor.execute(_INSERT.format(values=placeholders), params)
            row = cursor.fetchone()
        return None if row is None else int(row[0])

    def insert_debounced(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        text: str,
        stamps: Stamps,
        key: str,
        deadline: datetime | None,
    ) -> int | None:
        row = debounce_rows.values(queue, text, stamps, key, deadline)
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_DEBOUNCED, [self._param(connection, v) for v in row])
            found = cursor.fetchone()
        return None if found is None else int(found[0])

    def lock_unique_window(
        self, connection: BaseDatabaseWrapper, queue: str, key: str, now: datetime
    ) -> int | None:
        # A read first would leave the transaction to upgrade to the write lock later, which
        # fails at once when another writer came between; the INSERT takes it instead.
        return None

    def claim(
        self, connection: BaseDatabaseWrapper, queue: str, worker_id: str, n: int, now: datetime
    ) -> tuple[list[tuple[Job, Claim]], list[Job]]:
        at = self.param_datetime(connection, now)
        with connection.cursor() as cursor:
            cursor.execute(_ANY_CLAIMABLE, [queue, at, at, queue, at])
            if not cursor.fetchone()[0]:
                return [], []
        with transaction.atomic(using=connection.alias):
            # The dead letters come first: their DELETE is the write that takes the lock.
            dead = self._dead_letter_where(
                connection, _LAPSED_EXHAUSTED_IN_QUEUE, [queue, now, now], now,
                MAX_ATTEMPTS_EXCEEDED, MAX_ATTEMPTS_EXCEEDED,
            )  # fmt: skip
            with connection.cursor() as cursor:
                chosen = _best(
                    [*_fetch(cursor, _DUE, [queue, at, at, n]),
                     *_fetch(cursor, _LAPSED, [queue, at, at, n])], n
                )  # fmt: skip
                claimed = []
                for start in range(0, len(chosen), _STAMP_CHUNK):
                    part = chosen[start : start + _STAMP_CHUNK]
                    rows = ", ".join(["(%s, %s, %s)"] * len(part))
                    params: list[Any] = [worker_id, at]
                    for job_id, lease in part:
                        expires = self.param_datetime(connection, _plus(now, lease))
                        params += [job_id, uuid.uuid4().hex, expires]
                    claimed += _fetch(cursor, _STAMP_CLAIM.format(rows=rows), params)
        return self._handed_out(claimed, now), [self.to_job(row, now) for row in dead]

    def _handed_out(self, rows: Sequence[Row], now: datetime) -> list[tuple[Job, Claim]]:
        """Claimed rows (ROW_FIELDS order) as jobs and their claims, in handout order:
        priority descending, then run_at, then id (each half of the claim reads its own
        index in that order; the two are merged here)."""
        handed = [(self.to_job(row, now), Claim(row[0], self._token_of(row))) for row in rows]
        handed.sort(key=lambda pair: (-pair[0].priority, pair[0].run_at, pair[0].id))
        return handed

    def _token_of(self, row: Row) -> uuid.UUID:
        token = self.read_token(row[_TOKEN_AT])
        assert token is not None
        return token

    def ack(
        self,
        connection: BaseDatabaseWrapper,
        claims: Sequence[Claim],
        now: datetime,
        entries: Sequence[HistoryEntry | None] | None = None,
        plain_only: bool = False,
    ) -> Acked[Claim]:
        at = self.param_datetime(connection, now)
        kept = {} if entries is None else {
            claim: done for claim, done in zip(claims, entries, strict=True) if done is not None
        }  # fmt: skip
        statement = _ACK_KEEPING if kept else _ACK
        plain = _PLAIN_ONLY if plain_only else ""
        done: Acked[Claim] = Acked([], [])
        # No savepoint: inside operations.ack's transaction this is part of it.
        writes = transaction.atomic(using=connection.alias, savepoint=False)
        with writes, connection.cursor() as cursor:
            for chunk in chunked(claims, self.ids_per_statement):
                params = [v for claim in chunk for v in (claim.id, claim.token.hex)]
                pairs = ", ".join(["(%s, %s)"] * len(chunk))
                cursor.execute(statement.format(pairs=pairs, plain=plain), [*params, at])
                rows = cursor.fetchall()
                for row in rows:
                    done.add(returned_claim(row), row[-1])
                if kept:
                    self._keep(connection, cursor, rows, kept, now)
        return done

    def _keep(
        self, connection: BaseDatabaseWrapper, cursor: Any, rows: Sequence[Row],
        kept: dict[Claim, HistoryEntry], now: datetime,
    ) -> None:  # fmt: skip
        """Write the acked rows that have a HistoryEntry to the history (the ack's transaction)."""
        at = self.param_datetime(connection, now)
        values = []
        for row in rows:
            done = kept.get(returned_claim(row))
            if done is not None:
                after = self.param_datetime(connection, now + timedelta(seconds=done.keep))
                values.append([
                    row[0], *row[2:14], at, done.duration, row[14], "succeeded", done.output,
                    done.output_error, after,
                ])  # fmt: skip
        if values:
            cursor.executemany(_KEEP, values)

    def ack_batch(
        self, connection: BaseDatabaseWrapper, queue: str, ids: Sequence[int], now: datetime,
        done: HistoryEntry | None = None, plain_only: bool = False,
    ) -> Acked[int]:  # fmt: skip
        at = self.param_datetime(connection, now)
        acked: Acked[int] = Acked([], [])
        statement = _ACK_BATCH if done is None else _ACK_BATCH_KEEPING
        plain = _PLAIN_ONLY if plain_only else ""
        writes = self.all_or_nothing(connection, len(ids)) if done is None else (
            transaction.atomic(using=connection.alias, savepoint=False)
        )  # fmt: skip
        with writes, connection.cursor() as cursor:
            for chunk in chunked(ids, self.ids_per_statement):
                marks = ", ".join(["%s"] * len(chunk))
                cursor.execute(statement.format(marks=marks, plain=plain), [*chunk, queue, at])
                rows = cursor.fetchall()
                for row in rows:
                    acked.add(row[0], row[-1])
                if done is not None:
                    kept = {returned_claim(row): done for row in rows}
                    self._keep(connection, cursor, rows, kept, now)
        return acked

    def retry(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        run_at: datetime,
        error: str | None,
    ) -> bool:
        return self._unclaim(connection, _RETRY, claim, now, run_at, error)

    def record_step(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, name: str,
        value: str, duration: float,
    ) -> bool:  # fmt: skip
        at = self.param_datetime(connection, now)
        with connection.cursor() as cursor:
            cursor.execute(_RECORD_STEP, [name, value, at, duration, claim.id,
                                          self.param_token(claim.token), at])  # fmt: skip
            return bool(cursor.rowcount == 1)

    def release(self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime) -> bool:
        return self._unclaim(connection, _RELEASE, claim, now, now, None)

    def snooze(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, run_at: datetime
    ) -> bool:
        return self._unclaim(connection, _SNOOZE, claim, now, run_at, None)

    def _unclaim(
        self,
        connection: BaseDatabaseWrapper,
        statement: str,
        claim: Claim,
        now: datetime,
        run_at: datetime,
        error: str | None,
    ) -> bool:
        at = self.param_datetime(connection, now)
        params = [self.param_datetime(connection, run_at), error, claim.id, claim.token.hex, at]
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return bool(cursor.rowcount == 1)

    def heartbeat(
        self,
        connection: BaseDatabaseWrapper,
        heartbeats: Sequence[tuple[Claim, datetime]],
        now: datetime,
        progress: Mapping[Claim, Progress] | None = None,
    ) -> list[Claim]:
        at = self.param_datetime(connection, now)
        extended: list[Claim] = []
        reports = progress or {}
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            for claim, expires in heartbeats:
                fence = [claim.id, claim.token.hex, at]
                report = reports.get(claim)
                if report is None:
                    cursor.execute(_HEARTBEAT, [self.param_datetime(connection, expires), *fence])
                else:
                    cursor.execute(_HEARTBEAT_WITH_PROGRESS, [
                        self.param_datetime(connection, expires), report.stored(),
                        self.param_datetime(connection, report.updated_at), *fence,
                    ])  # fmt: skip
                extended.extend(returned_claim(row) for row in cursor.fetchall())
        return extended

    def delete_old_dead_letters(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        # julianday() reads Django's stored text timestamps; retention is in seconds.
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {DEAD_LETTER_TABLE} WHERE retention IS NOT NULL "
                "AND (julianday(%s) - julianday(died_at)) * 86400.0 > retention",
                [self.param_datetime(connection, now)],
            )
            return int(cursor.rowcount)

    def fail(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        reason: str,
        error: str,
    ) -> Row | None:
        rows = self._dead_letter_where(
            connection, BY_CLAIM, [claim.id, claim.token, now], now, reason, error
        )
        return rows[0] if rows else None

    def crashed(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        limit: int,
        retry: CrashRetry,
    ) -> tuple[bool, Row | None]:
        with transaction.atomic(using=connection.alias):
            params = [claim.id, claim.token, now, limit]
            last = BY_CLAIM + " AND crashes + 1 >= %s"
            error = retry.error or CRASHED_ITS_WORKER
            dead = self._dead_letter_where(connection, last, params, now, CRASHED_ITS_WORKER, error)
            if dead:
                return True, dead[0]
            if retry.out_of_attempts:
                row = self.fail(connection, claim, now, MAX_ATTEMPTS_EXCEEDED,
                                retry.error or MAX_ATTEMPTS_EXCEEDED)  # fmt: skip
                return row is not None, row
            unclaimed = self._unclaim(connection, _CRASHED, claim, now, retry.run_at, retry.error)
            return unclaimed, None

    def sweep_expired(
        self, connection: BaseDatabaseWrapper, queue: str | None, now: datetime, reason: str
    ) -> list[Row]:
        if queue is None:
            return self._dead_letter_where(connection, _EXPIRED, [now], now, reason, reason)
        return self._dead_letter_where(
            connection, _EXPIRED_IN_QUEUE, [queue, now], now, reason, reason
        )

    def reclaim(
        self, connection: BaseDatabaseWrapper, now: datetime
    ) -> tuple[list[int], list[Row]]:
        reason = MAX_ATTEMPTS_EXCEEDED
        with transaction.atomic(using=connection.alias):
            dead = self._dead_letter_where(
                connection, _LAPSED_EXHAUSTED, [now], now, reason, reason
            )
            with connection.cursor() as cursor:
                cursor.execute(_RECLAIM, [self.param_datetime(connection, now)])
                return [row[0] for row in cursor.fetchall()], dead

    def dead_letter(
        self,
        connection: BaseDatabaseWrapper,
        ids: Sequence[int],
        now: datetime,
        reason: str,
        error: str,
    ) -> list[Row]:
        dead: list[Row] = []
        with transaction.atomic(using=connection.alias, savepoint=False):
            for chunk in chunked(list(ids), self.ids_per_statement):
                predicate = f"id IN ({', '.join(['%s'] * len(chunk))})"
                dead.extend(self._dead_letter_where(connection, predicate, chunk, now, reason,
                                                    error))  # fmt: skip
        return dead

    def _dead_letter_where(
        self,
        connection: BaseDatabaseWrapper,
        predicate: str,
        params: Sequence[Any],
        now: datetime,
        reason: str,
        error: str,
    ) -> list[Row]:
        """dead_letter() for the live rows matching `predicate`; returns the dead rows.
        The predicate binds no ids; the dead rows are read back id by id, in chunks."""
        died_at = self.param_datetime(connection, now)
        writes = transaction.atomic(using=connection.alias, savepoint=False)
        with writes, connection.cursor() as cursor:
            cursor.execute(
                _TAKE_FOR_DEAD_LETTER.format(predicate=predicate),
                [*(self._param(connection, p) for p in params), died_at],
            )
            taken = cursor.fetchall()
            if not taken:
                return []
            group = fingerprint(error)
            cursor.executemany(
                _INSERT_DEAD, [(*row, died_at, reason, error, group) for row in taken]
            )
            dead: list[Row] = []
            for ids in chunked([row[0] for row in taken], self.ids_per_statement):
                marks = ", ".join(["%s"] * len(ids))
                cursor.execute(
                    f"SELECT {DEAD_COLUMNS} FROM {DEAD_LETTER_TABLE} WHERE job_id IN ({marks})",
                    ids,
                )
                dead.extend(cursor.fetchall())
            return dead

    def _param(self, connection: BaseDatabaseWrapper, value: Any) -> Any:
        if isinstance(value, datetime):
            return self.param_datetime(connection, value)
        if isinstance(value, uuid.UUID):
            return value.hex
        return value


def _plus(moment: datetime, seconds: float) -> datetime:
    return moment + timedelta(seconds=seconds)


def _fetch(cursor: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    cursor.execute(sql, params)
    return list(cursor.fetchall())


def _best(rows: list[tuple[Any, ...]], n: int) -> list[tuple[int, float]]:
    """(id, lease) of the best n of the due and lapsed rows, in handout order: priority
    first, then run_at (stored as ISO text, so text order is time order), then id."""
    rows.sort(key=lambda row: (-row[2], row[3], row[0]))
    return [(row[0], row[1]) for row in rows[:n]]
