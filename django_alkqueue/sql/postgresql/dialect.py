"""PostgreSQL's dialect: the Dialect interface over statements.py, run through session.py."""

from __future__ import annotations

import itertools
import operator
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ...conf import get_settings
from ...error_groups import fingerprint
from ...jobs import (
    CRASHED_ITS_WORKER,
    MAX_ATTEMPTS_EXCEEDED,
    HistoryEntry,
    Job,
    Progress,
    Stamps,
    make_job,
)
from ...limit_values import Limits
from ...payload import decode
from .. import debounce_rows
from .. import limited_claim as orm_limited_claim
from ..base import (
    KEYLESS_INSERT_FIELDS,
    Acked,
    Claim,
    Claimed,
    CrashRetry,
    Notifications,
    Row,
    WriteChunk,
    chunked,
    gather_steps,
    insert_values,
    returned_claim,
)
from ..locks import POSTGRES_LOCK
from . import cancel_channel, catalog, history, limited_claim
from . import statements as sql
from .copy_rows import TYPES as COPY_TYPES
from .copy_rows import CopyRows
from .listen import listening
from .session import fetch_all
from .wake_pacing import wake_due, wake_sent

_claim_id = operator.attrgetter("id")
_claim_token = operator.attrgetter("token")


class PostgresDialect(debounce_rows.UpdateInPlace, orm_limited_claim.OrmClaims):
    supports_notify = True
    supports_advisory_locks = True
    session_lock = POSTGRES_LOCK
    supports_planner_estimates = True
    supports_catalog_health = True
    supports_update_returning = True
    # Arrays travel as one parameter each; the bound keeps one statement's rows and locks small.
    ids_per_statement = 10_000

    @contextmanager
    def insert_many(
        self, connection: BaseDatabaseWrapper, queue: str, stamps: Stamps, count: int
    ) -> Iterator[WriteChunk]:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(sql.RESERVE_IDS, [count])
            unused = iter(sorted(cursor.fetchone()[0]))
            rows = CopyRows(queue, stamps)
            # Django's documented CursorWrapper.cursor: the psycopg cursor, for its copy().
            with cursor.cursor.copy(sql.COPY + rows.options) as copy:
                copy.set_types(COPY_TYPES)
                write_row = copy.write_row

                def write(texts: Sequence[str]) -> list[int]:
                    ids = list(itertools.islice(unused, len(texts)))
                    for row in rows.rows(ids, texts):
                        write_row(row)
                    return ids  # the server parses the chunk while the caller goes on

                yield write
            cursor.execute("SELECT pg_notify(%s, %s)", [sql.NOTIFY_CHANNEL, queue])

    def insert_unique(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int | None:
        params = [*insert_values(queue, text, stamps), queue]
        rows = fetch_all(connection, sql.INSERT_UNIQUE, params)
        return int(rows[0][0]) if rows else None

    def insert_debounced(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        text: str,
        stamps: Stamps,
        key: str,
        deadline: datetime | None,
    ) -> int | None:
        params = [*debounce_rows.values(queue, text, stamps, key, deadline), queue]
        rows = fetch_all(connection, sql.INSERT_DEBOUNCED, params)
        return int(rows[0][0]) if rows else None

    def insert_one(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int:
        assert stamps.unique_key is None
        values = insert_values(queue, text, stamps)[: len(KEYLESS_INSERT_FIELDS)]
        autocommit = connection.get_autocommit()
        window = get_settings().NOTIFY_WINDOW
        if not wake_due(connection, queue, window, time.monotonic(), autocommit):
            return int(fetch_all(connection, sql.INSERT_KEYLESS_QUIET, values)[0][0])
        job_id = int(fetch_all(connection, sql.INSERT_KEYLESS, [*values, queue])[0][0])
        if autocommit:  # committed: the window starts now
            wake_sent(connection, queue, time.monotonic())
        return job_id

    def prepare_history(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        return history.prepare(connection, now)

    def sweep_history(self, connection: BaseDatabaseWrapper, now: datetime, batch: int) -> int:
        return history.sweep(connection, now, batch)

    def wake_after_insert(self, connection: BaseDatabaseWrapper, queue: str, single: bool) -> None:
        pass  # the INSERT statements send their NOTIFY (wake_pacing.py)

    def notify(self, connection: BaseDatabaseWrapper, queue: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [sql.NOTIFY_CHANNEL, queue])

    def listen(
        self,
        connection: BaseDatabaseWrapper,
        cancels: tuple[str, Callable[[int], object]] | None = None,
    ) -> AbstractContextManager[Notifications]:
        if cancels is not None:
            cancels = (cancel_channel(cancels[0]), cancels[1])
        return listening(connection, sql.NOTIFY_CHANNEL, cancels)

    def notify_cancel(self, connection: BaseDatabaseWrapper, worker_id: str, job_id: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [cancel_channel(worker_id), str(job_id)])

    def dead_tuples(self, connection: BaseDatabaseWrapper) -> int | None:
        with connection.cursor() as cursor:
            cursor.execute(sql.DEAD_TUPLES)
            row = cursor.fetchone()
        return None if row is None else int(row[0])

    def table_dead_tuples(
        self, connection: BaseDatabaseWrapper, tables: Sequence[str]
    ) -> dict[str, int] | None:
        with connection.cursor() as cursor:
            cursor.execute(sql.TABLE_DEAD_TUPLES, [list(tables)])
            return {name: int(dead) for name, dead in cursor.fetchall()}

    def queue_table_stats(self, connection: BaseDatabaseWrapper) -> list[dict[str, Any]]:
        return catalog.rows_of(connection, catalog.QUEUE_TABLES)

    def open_sessions(self, connection: BaseDatabaseWrapper) -> list[dict[str, Any]]:
        return catalog.rows_of(connection, catalog.SESSIONS)

    def replication_slots(self, connection: BaseDatabaseWrapper) -> list[dict[str, Any]]:
        return catalog.rows_of(connection, catalog.SLOTS)

    def vacuum(self, connection: BaseDatabaseWrapper) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql.VACUUM)

    def statistics_say_empty(self, connection: BaseDatabaseWrapper) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(sql.STATISTICS_SAY_EMPTY)
            row = cursor.fetchone()
        return bool(row and row[0])

    def analyze(self, connection: BaseDatabaseWrapper) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql.ANALYZE)

    def vacuum_horizon(self, connection: BaseDatabaseWrapper) -> str | None:
        with connection.cursor() as cursor:
            cursor.execute(sql.VACUUM_HORIZON)
            row = cursor.fetchone()
        return None if row is None else str(row[0])

    def uses_fair_keys(self, connection: BaseDatabaseWrapper, queue: str) -> bool:
        # Queue.claim asks before each claim: a prepared statement, not a compiled queryset.
        return bool(fetch_all(connection, sql.USES_FAIR_KEYS, [queue])[0][0])

    def claim(
        self, connection: BaseDatabaseWrapper, queue: str, worker_id: str, n: int, now: datetime
    ) -> tuple[list[tuple[Job, Claim]], list[Job]]:
        token = uuid.uuid4()
        params = sql.claim_params(queue, worker_id, n, now, token)
        rows = fetch_all(connection, sql.CLAIM, params, generic_plan=True)
        handed: list[tuple[Job, Claim]] = []
        dead: list[Job] = []
        # Unpacked by position, into the Job's fields: one Job per handed-out row.
        for (
            job_id, payload, priority, attempts, max_attempts, backoff_base, lease, retention,
            run_at, enqueued_at, expires_at, unique_key, lease_expires_at, last_error,
            concurrency_key, trace_context, requeued_at, dead_claimed_by, dead_claimed_at,
        ) in rows:  # fmt: skip
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
            if lease_expires_at is not None:
                handed.append((make_job(fields), Claim(job_id, token)))
            else:
                fields.update(state="dead", claimed_by=dead_claimed_by,
                              claimed_at=dead_claimed_at, died_at=now,
                              reason=MAX_ATTEMPTS_EXCEEDED)  # fmt: skip
                dead.append(make_job(fields))
        return handed, dead

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
        return limited_claim.claim(self, connection, queue, worker_id, n, now, limits, clock)

    def ack(
        self,
        connection: BaseDatabaseWrapper,
        claims: Sequence[Claim],
        now: datetime,
        entries: Sequence[HistoryEntry | None] | None = None,
        plain_only: bool = False,
    ) -> Acked[Claim]:
        # The per-job work stays in C (count, map, comprehensions): a batch consumer acks
        # thousands of jobs a second through here.
        if entries is not None and entries.count(None) < len(entries):
            return self._ack_keeping(connection, claims, now, entries, plain_only)
        statement = sql.ACK_PLAIN if plain_only else sql.ACK
        done: Acked[Claim] = Acked([], [])
        for chunk in chunked(claims, self.ids_per_statement):
            ids, tokens = (
                sql.bigint_array(map(_claim_id, chunk)),
                sql.uuid_array(map(_claim_token, chunk)),
            )
            rows = fetch_all(connection, statement, [ids, tokens, now], generic_plan=True)
            done.done.extend([chunk[place - 1] for place, _ in rows])
            done.in_workflows.extend([chunk[place - 1].id for place, marked in rows if marked])
        return done

    def _ack_keeping(
        self,
        connection: BaseDatabaseWrapper,
        claims: Sequence[Claim],
        now: datetime,
        entries: Sequence[HistoryEntry | None],
        plain_only: bool,
    ) -> Acked[Claim]:
        statement = sql.ACK_KEEPING_PLAIN if plain_only else sql.ACK_KEEPING
        done: Acked[Claim] = Acked([], [])
        with self.all_or_nothing(connection, len(claims)):
            for start in range(0, len(claims), self.ids_per_statement):
                chunk = claims[start : start + self.ids_per_statement]
                kept = entries[start : start + self.ids_per_statement]
                params = [
                    sql.bigint_array(c.id for c in chunk), sql.uuid_array(c.token for c in chunk),
                    [None if f is None else f.keep for f in kept],
                    [None if f is None else f.duration for f in kept],
                    [None if f is None else f.output for f in kept],
                    [None if f is None else f.output_error for f in kept],
                    now, now, now,
                ]  # fmt: skip
                rows = fetch_all(connection, statement, params, generic_plan=True)
                for place, marked in rows:
                    done.add(chunk[place - 1], marked)
        return done

    def ack_batch(
        self, connection: BaseDatabaseWrapper, queue: str, ids: Sequence[int], now: datetime,
        done: HistoryEntry | None = None, plain_only: bool = False,
    ) -> Acked[int]:  # fmt: skip
        acked: Acked[int] = Acked([], [])
        if done is None:
            statement = sql.ACK_BATCH_PLAIN if plain_only else sql.ACK_BATCH
        else:
            statement = sql.ACK_BATCH_KEEPING_PLAIN if plain_only else sql.ACK_BATCH_KEEPING
        kept: list[Any] = [] if done is None else [now, now, done.keep]
        with self.all_or_nothing(connection, len(ids)), connection.cursor() as cursor:
            for chunk in chunked(ids, self.ids_per_statement):
                cursor.execute(statement, [sql.bigint_array(chunk), queue, now, *kept])
                for job_id, marked in cursor.fetchall():
                    acked.add(job_id, marked)
        return acked

    def retry(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        run_at: datetime,
        error: str | None,
    ) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(sql.RETRY, [run_at, error, claim.id, claim.token, now])
            return bool(cursor.rowcount == 1)

    def record_step(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, name: str,
        value: str, duration: float,
    ) -> bool:  # fmt: skip
        params = [name, value, now, duration, claim.id, claim.token, now]
        return bool(fetch_all(connection, sql.RECORD_STEP, params))

    def load_claimed_steps(
        self, connection: BaseDatabaseWrapper, claims: Sequence[Claim], now: datetime
    ) -> dict[int, dict[str, str]]:
        loaded: dict[int, dict[str, str]] = {}
        wanted = set(claims)
        for chunk in chunked(claims, self.ids_per_statement):
            ids = sql.bigint_array(claim.id for claim in chunk)
            tokens = sql.uuid_array({claim.token for claim in chunk})
            rows = fetch_all(connection, sql.LOAD_CLAIMED_STEPS, [ids, tokens, now],
                             generic_plan=True)  # fmt: skip
            gather_steps(loaded, rows, wanted, self.read_token)
        return loaded

    def delete_steps(self, connection: BaseDatabaseWrapper, job_ids: Sequence[int]) -> int:
        ids = sql.bigint_array(job_ids)  # one parameter, however many ids
        with connection.cursor() as cursor:
            cursor.execute(sql.DELETE_SIGNALS_OF, [ids])
            cursor.execute(sql.DELETE_STEPS_OF, [ids])
            return int(cursor.rowcount)

    def release(self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(sql.RELEASE, [now, None, claim.id, claim.token, now])
            return bool(cursor.rowcount == 1)

    def snooze(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, run_at: datetime
    ) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(sql.SNOOZE, [run_at, None, claim.id, claim.token, now])
            return bool(cursor.rowcount == 1)

    def heartbeat(
        self,
        connection: BaseDatabaseWrapper,
        heartbeats: Sequence[tuple[Claim, datetime]],
        now: datetime,
        progress: Mapping[Claim, Progress] | None = None,
    ) -> list[Claim]:
        extended: list[Claim] = []
        for chunk in chunked(heartbeats, self.ids_per_statement):
            ids = [claim.id for claim, _ in chunk]
            tokens = [claim.token for claim, _ in chunk]
            expiries = [expires for _, expires in chunk]
            if progress:
                reports = [progress.get(claim) for claim, _ in chunk]
                texts = [None if p is None else p.stored() for p in reports]
                times = [None if p is None else p.updated_at for p in reports]
                params = [ids, now, ids, tokens, expiries, texts, times]
                statement = sql.HEARTBEAT_WITH_PROGRESS
            else:
                params, statement = [ids, now, ids, tokens, expiries], sql.HEARTBEAT
            rows = fetch_all(connection, statement, params, generic_plan=True)
            extended.extend(returned_claim(row) for row in rows)
        return extended

    def delete_old_dead_letters(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        with connection.cursor() as cursor:
            cursor.execute(sql.DELETE_OLD_DEAD_LETTERS, [now])
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
            connection, sql.FAIL, [claim.id, claim.token, now], now, reason, error
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
        params = [claim.id, claim.token, now, limit]
        error = retry.error or CRASHED_ITS_WORKER
        dead = self._dead_letter_where(
            connection, sql.CRASHED_DEAD, params, now, CRASHED_ITS_WORKER, error
        )
        if dead:
            return True, dead[0]
        if retry.out_of_attempts:
            row = self.fail(connection, claim, now, MAX_ATTEMPTS_EXCEEDED,
                            retry.error or MAX_ATTEMPTS_EXCEEDED)  # fmt: skip
            return row is not None, row
        with connection.cursor() as cursor:
            cursor.execute(sql.CRASHED, [retry.run_at, retry.error, claim.id, claim.token, now])
            return cursor.rowcount == 1, None

    def sweep_expired(
        self, connection: BaseDatabaseWrapper, queue: str | None, now: datetime, reason: str
    ) -> list[Row]:
        if queue is None:
            return self._dead_letter_where(
                connection, sql.SWEEP_EXPIRED, [now], now, reason, reason
            )
        return self._dead_letter_where(
            connection, sql.SWEEP_EXPIRED_IN_QUEUE, [queue, now], now, reason, reason
        )

    def reclaim(
        self, connection: BaseDatabaseWrapper, now: datetime
    ) -> tuple[list[int], list[Row]]:
        reason = MAX_ATTEMPTS_EXCEEDED
        dead = self._dead_letter_where(
            connection, sql.RECLAIM_EXHAUSTED, [now], now, reason, reason
        )
        with connection.cursor() as cursor:
            cursor.execute(sql.RECLAIM, [now])
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
        with self.all_or_nothing(connection, len(ids)):
            for chunk in chunked(ids, self.ids_per_statement):
                params = [sql.bigint_array(chunk)]
                dead.extend(self._dead_letter_where(connection, sql.DEAD_LETTER_BY_ID, params,
                                                    now, reason, error))  # fmt: skip
        return dead

    def _dead_letter_where(
        self,
        connection: BaseDatabaseWrapper,
        statement: str,
        params: list[Any],
        now: datetime,
        reason: str,
        error: str,
    ) -> list[Row]:
        """dead_letter() for the live rows `statement` (a form of statements._DEAD_LETTER)
        picks with `params`, in that one statement."""
        with connection.cursor() as cursor:
            cursor.execute(statement, [*params, now, now, reason, error, fingerprint(error)])
            return list(cursor.fetchall())
