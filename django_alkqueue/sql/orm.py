"""The ORM dialect: every state change written with Django's ORM alone.

It serves every database whose backend has SELECT ... FOR UPDATE SKIP LOCKED and no dialect
of its own (MariaDB 10.6+, MySQL 8.0.1+; Oracle untested), and it is the reference the
specialised dialects are checked against: ALKQUEUE["DIALECT"] = "orm" runs PostgreSQL and
SQLite through it too. A claim locks its candidates with
`select_for_update(skip_locked=True)`, so concurrent claimers pass each other by instead of
waiting, then stamps them with ORM updates in the same transaction. Every completion is
fenced by the claim token and the lease, exactly as in the other dialects.

Where the database has no row locks (SQLite), each transaction that reads before it writes
starts with a write, which takes the database's write lock first (see sqlite.py).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Q, QuerySet, TextField, Value

from ..jobs import CRASHED_ITS_WORKER, MAX_ATTEMPTS_EXCEEDED, HistoryEntry, Job, Progress, Stamps
from ..models import MESSAGE_TABLE, STEP_TABLE, DeadLetter, QueueMessage
from . import debounce_rows, fair_claims, innodb, limited_claim, queue_stat_deltas, unique_windows
from .base import Acked, Claim, CrashRetry, Row, TakenDeadLetter, WriteChunk
from .locks import SessionLock
from .orm_rows import (
    CHUNK,
    HANDOUT,
    as_claimed,
    as_dead_letter,
    as_dead_row,
    by_claim,
    chunks,
    dead_rows,
    dying_rows,
    expired,
    handout_key,
    insert_groups,
    lapsed_exhausted,
    live_rows,
    not_expired,
    taken_dead_letters,
)


class OrmDialect(limited_claim.OrmClaims):
    # Transactions here take no savepoint inside a caller's block (savepoint=False): only a
    # database error can interrupt them, which spoils the caller's block anyway, and a
    # savepoint is two more round trips. insert_many and insert_unique keep theirs.

    ids_per_statement = CHUNK

    def __init__(
        self,
        session_lock: SessionLock | None = None,
        innodb_metrics: bool = False,
        on_duplicate_key: bool = False,
        innodb_inserts: bool = False,
    ) -> None:
        self.session_lock = session_lock
        self.supports_advisory_locks = session_lock is not None
        self.supports_undo_history = innodb_metrics
        #: MariaDB and MySQL spell an upsert INSERT ... ON DUPLICATE KEY UPDATE; PostgreSQL and
        #: SQLite, which this dialect serves too under DIALECT "orm", ON CONFLICT.
        self.on_duplicate_key = on_duplicate_key
        #: MariaDB and MySQL enqueue through the hand-written statements of innodb.py.
        self.innodb_inserts = innodb_inserts

    def undo_history_length(self, connection: BaseDatabaseWrapper) -> int | None:
        return innodb.history_length(connection) if self.supports_undo_history else None

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _live(connection: BaseDatabaseWrapper) -> QuerySet[QueueMessage]:
        return QueueMessage.objects.using(connection.alias)

    def _write_lock_first(self, connection: BaseDatabaseWrapper) -> None:
        """Without row locks, take the database's write lock before the first read: a write
        that matches nothing does (a read first could not upgrade to a write later)."""
        if not connection.features.has_select_for_update:
            self._live(connection).filter(id=0).update(attempts=F("attempts"))

    # -- reads -----------------------------------------------------------------------------

    def select_job(
        self, connection: BaseDatabaseWrapper, job_id: int, queue: str | None
    ) -> Row | None:
        scope = Q() if queue is None else Q(queue=queue)
        live = live_rows(self._live(connection).filter(scope, id=job_id))
        if live:
            return live[0]
        dead = DeadLetter.objects.using(connection.alias).filter(scope, job_id=job_id)
        rows = dead_rows(dead)
        return rows[0] if rows else None

    def select_live_by_key(
        self, connection: BaseDatabaseWrapper, queue: str, key: str
    ) -> Row | None:
        rows = live_rows(self._live(connection).filter(queue=queue, unique_key=key))
        return rows[0] if rows else None

    def take_dead_letter(
        self, connection: BaseDatabaseWrapper, job_id: int, queue: str | None
    ) -> TakenDeadLetter | None:
        scope = Q() if queue is None else Q(queue=queue)
        dead = DeadLetter.objects.using(connection.alias).filter(scope, job_id=job_id)
        with transaction.atomic(using=connection.alias, savepoint=False):
            self._write_lock_first(connection)
            rows = taken_dead_letters(dead.select_for_update())
            # Of two concurrent requeues only the one whose DELETE removes the row goes on.
            if not rows or not dead.delete()[0]:
                return None
        return rows[0]

    def lock_claim(self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime) -> bool:
        # A no-op update locks the row (and takes SQLite's write lock) until commit.
        valid = self._live(connection).filter(by_claim(*claim, now))
        return valid.update(claimed_at=F("claimed_at")) == 1

    # -- enqueue ---------------------------------------------------------------------------

    @staticmethod
    def _message(queue: str, text: str, stamps: Stamps) -> QueueMessage:
        # The payload goes in as the text already encoded, not through the field's encoder.
        return QueueMessage(
            queue=queue, payload=Value(text, output_field=TextField()),
            priority=stamps.priority, attempts=0, max_attempts=stamps.max_attempts,
            backoff_base=stamps.backoff_base, lease=stamps.lease, retention=stamps.retention,
            run_at=stamps.run_at, enqueued_at=stamps.enqueued_at, expires_at=stamps.expires_at,
            unique_key=stamps.unique_key, trace_context=stamps.trace_context,
        )  # fmt: skip

    @contextmanager
    def insert_many(
        self, connection: BaseDatabaseWrapper, queue: str, stamps: Stamps, count: int
    ) -> Iterator[WriteChunk]:
        live = self._live(connection)
        returns_ids = connection.features.can_return_rows_from_bulk_insert
        # With a savepoint: a payload that fails to encode mid-way rolls back these rows
        # alone, and the caller's transaction goes on.
        with transaction.atomic(using=connection.alias):

            def write(texts: Sequence[str]) -> list[int]:
                if returns_ids and self.innodb_inserts:  # MariaDB 10.5+: INSERT ... RETURNING
                    return innodb.insert_many(connection, queue, texts, stamps)
                rows = [self._message(queue, text, stamps) for text in texts]
                if returns_ids:
                    for group in insert_groups(texts):
                        live.bulk_create(rows[group])
                else:  # MySQL: no ids back from a multi-row INSERT, so one INSERT each
                    for row in rows:
                        row.save(using=connection.alias, force_insert=True)
                return [row.pk for row in rows]

            yield write

    def insert_one(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int:
        if self.innodb_inserts:
            return innodb.insert_one(connection, queue, text, stamps)
        row = self._message(queue, text, stamps)
        row.save(using=connection.alias, force_insert=True)  # one INSERT, no savepoint
        return int(row.pk)

    def insert_unique(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int | None:
        row = self._message(queue, text, stamps)
        try:
            # A savepoint: on PostgreSQL the refused INSERT would abort the caller's block.
            with transaction.atomic(using=connection.alias):
                row.save(using=connection.alias, force_insert=True)
        except IntegrityError:
            return None  # alkqueue_live_unique_key (or 0009's stand-in) refused the key
        return int(row.pk)

    def update_debounced(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        key: str,
        text: str,
        run_at: datetime,
        expires_at: datetime | None,
    ) -> Row | None:
        return debounce_rows.update_in_place_by_orm(
            connection, queue, key, text, run_at, expires_at
        )

    def insert_debounced(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        text: str,
        stamps: Stamps,
        key: str,
        deadline: datetime | None,
    ) -> int | None:
        row = self._message(queue, text, stamps)
        row.debounce_key, row.debounce_deadline = key, deadline
        return debounce_rows.insert_by_orm(connection, row)

    def is_deadlock(self, error: Exception) -> bool:
        return innodb.is_deadlock(error)

    def lock_unique_window(
        self, connection: BaseDatabaseWrapper, queue: str, key: str, now: datetime
    ) -> int | None:
        self._write_lock_first(connection)
        return self._holder(unique_windows.lock_by_orm(connection, queue, key), now)

    def take_unique_window(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        key: str,
        job_id: int,
        now: datetime,
        lapses_at: datetime,
    ) -> int | None:
        return unique_windows.take_by_orm(connection, queue, key, job_id, now, lapses_at)

    # -- claim -----------------------------------------------------------------------------

    def claim(
        self, connection: BaseDatabaseWrapper, queue: str, worker_id: str, n: int, now: datetime
    ) -> tuple[list[tuple[Job, Claim]], list[Job]]:
        token = uuid.uuid4()  # one per claim, shared by its jobs, as on PostgreSQL
        # Without row locks the claim takes the write lock: look first, so that an idle poll
        # takes no lock and does not wait behind a writer's open transaction.
        if not connection.features.has_select_for_update and not self._claimable(
            connection, queue, now
        ):
            return [], []
        with transaction.atomic(using=connection.alias, savepoint=False):
            self._write_lock_first(connection)
            # Whole rows at once: the handed-out jobs are built from them, not read again.
            # Every lapsed row (few): the best compete with the due ones, the exhausted die.
            candidates = [
                *live_rows(self.due(connection, queue, now)[:n]),
                *self._lapsed_rows(connection, queue, now),
            ]
            exhausted = [row[0] for row in candidates if row[4] >= row[5]]
            usable = sorted((row for row in candidates if row[4] < row[5]), key=handout_key)[:n]
            self._stamp(connection, usable, token, worker_id, now)
            dead = self.dead_letter(connection, exhausted, now, MAX_ATTEMPTS_EXCEEDED,
                                    MAX_ATTEMPTS_EXCEEDED)  # fmt: skip
        handed = [as_claimed(row, token, worker_id, now) for row in usable]
        return (
            [(self.to_job(row, now), Claim(row[0], token)) for row in handed],
            [self.to_job(row, now) for row in dead],
        )

    def _claimable(self, connection: BaseDatabaseWrapper, queue: str, now: datetime) -> bool:
        """Whether `queue` has a due or a lapsed row: the lock-free look before a claim."""
        due_or_lapsed = Q(claim_token__isnull=True, run_at__lte=now) | Q(
            claim_token__isnull=False, lease_expires_at__lte=now
        )
        live = self._live(connection).filter(not_expired(now), due_or_lapsed, queue=queue)
        return live.exists()

    def due(
        self, connection: BaseDatabaseWrapper, queue: str, now: datetime
    ) -> QuerySet[QueueMessage]:
        """The claim's first read: due, unclaimed rows of `queue` in handout order, locked,
        skipping rows other transactions hold (index alkqueue_pending_idx, or
        alkqueue_claim_full_idx where partial indexes are missing)."""
        return (
            self._live(connection)
            .select_for_update(skip_locked=True)
            .filter(not_expired(now), queue=queue, claim_token__isnull=True, run_at__lte=now)
            .order_by(*HANDOUT)
        )

    def _lapsed_rows(self, connection: BaseDatabaseWrapper, queue: str, now: datetime) -> list[Row]:
        """The claim's second read: claimed rows of `queue` whose lease lapsed, locked
        (index alkqueue_lease_idx). Ids first: there are seldom any, and a read of whole
        rows costs the ORM several times a read of ids to build."""
        live = self._live(connection)
        lapsed = Q(claim_token__isnull=False, lease_expires_at__lte=now)
        locked = live.select_for_update(skip_locked=True).filter(not_expired(now), lapsed)
        ids = list(locked.filter(queue=queue).order_by().values_list("id", flat=True))
        return [row for chunk in chunks(ids) for row in live_rows(live.filter(id__in=chunk))]

    def _stamp(
        self, connection: BaseDatabaseWrapper, rows: Sequence[Row], token: uuid.UUID,
        worker_id: str, now: datetime,
    ) -> None:  # fmt: skip
        """Hand the locked `rows` out under `token`: one UPDATE per lease length (row[7])."""
        for lease, group in itertools.groupby(sorted(rows, key=lambda row: row[7]),
                                              key=lambda row: row[7]):  # fmt: skip
            self._live(connection).filter(id__in=[row[0] for row in group]).update(
                attempts=F("attempts") + 1, claim_token=token, claimed_by=worker_id,
                claimed_at=now, lease_expires_at=now + timedelta(seconds=lease),
                debounce_key=None,  # the claimed job leaves its debounce key (sql/debounce_rows.py)
            )  # fmt: skip

    # -- completions, fenced by the claim --------------------------------------------------

    def ack(
        self,
        connection: BaseDatabaseWrapper,
        claims: Sequence[Claim],
        now: datetime,
        entries: Sequence[HistoryEntry | None] | None = None,
        plain_only: bool = False,
    ) -> Acked[Claim]:
        kept = {} if entries is None else {
            claim: done for claim, done in zip(claims, entries, strict=True) if done is not None
        }  # fmt: skip
        done: Acked[Claim] = Acked([], [])
        with transaction.atomic(using=connection.alias, savepoint=False):
            self._write_lock_first(connection)
            for chunk in chunks(claims):
                wanted = set(chunk)
                valid = self._valid_marked(connection, [c.id for c in chunk], now, plain_only)
                acked = [(claim, marked) for claim, marked in valid if claim in wanted]
                if kept:
                    self._keep(connection, [c for c, _ in acked if c in kept], kept, now)
                self._live(connection).filter(id__in=[c.id for c, _ in acked]).delete()
                for claim, marked in acked:
                    done.add(claim, marked)
        return done

    def _valid_marked(
        self, connection: BaseDatabaseWrapper, ids: Sequence[int], now: datetime,
        plain_only: bool, queue: str | None = None,
    ) -> list[tuple[Claim, bool]]:  # fmt: skip
        """The claims of these rows whose lease is live, each row locked until commit, and
        whether its row is marked in_workflow (Acked); with `plain_only`, unmarked rows only."""
        live = self._live(connection)
        rows = (live if queue is None else live.filter(queue=queue)).select_for_update()
        rows = rows.filter(id__in=ids, claim_token__isnull=False, lease_expires_at__gt=now)
        if plain_only:
            rows = rows.filter(in_workflow=False)
        return [
            (Claim(job_id, token), marked)
            for job_id, token, marked in rows.values_list("id", "claim_token", "in_workflow")
            if token is not None
        ]

    def _keep(
        self, connection: BaseDatabaseWrapper, claims: list[Claim], kept: dict[Claim, HistoryEntry],
        now: datetime,
    ) -> None:  # fmt: skip
        """Copy the acked rows that have a HistoryEntry to the history, before their delete and in
        its transaction (the rows are locked by _valid_marked)."""
        if not claims:
            return
        by_id = {claim.id: kept[claim] for claim in claims}
        rows = live_rows(self._live(connection).filter(id__in=list(by_id)))
        jobs = [self.to_job(row, now) for row in rows]
        self.keep_finished(connection, jobs, "succeeded", now, [by_id[job.id] for job in jobs])

    def _held(
        self, connection: BaseDatabaseWrapper, ids: Sequence[int], now: datetime
    ) -> list[Claim]:
        """The claims of these rows whose lease is live, each row locked until commit;
        rows other transactions hold are skipped."""
        rows = (
            self._live(connection)
            .select_for_update(skip_locked=True)
            .filter(id__in=ids, claim_token__isnull=False, lease_expires_at__gt=now)
            .values_list("id", "claim_token")
        )
        return [Claim(job_id, token) for job_id, token in rows if token is not None]

    def ack_batch(
        self, connection: BaseDatabaseWrapper, queue: str, ids: Sequence[int], now: datetime,
        done: HistoryEntry | None = None, plain_only: bool = False,
    ) -> Acked[int]:  # fmt: skip
        acked: Acked[int] = Acked([], [])
        with transaction.atomic(using=connection.alias, savepoint=False):
            self._write_lock_first(connection)
            for chunk in chunks(ids):
                valid = self._valid_marked(connection, chunk, now, plain_only, queue)
                if done is not None:
                    self._keep(connection, [c for c, _ in valid], dict.fromkeys(
                        [c for c, _ in valid], done), now)  # fmt: skip
                self._live(connection).filter(id__in=[c.id for c, _ in valid]).delete()
                for claim, marked in valid:
                    acked.add(claim.id, marked)
        return acked

    def retry(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        run_at: datetime,
        error: str | None,
    ) -> bool:
        changes: dict[str, Any] = {"run_at": run_at}
        if error is not None:
            changes["last_error"] = error
        return self._unclaim(connection, claim, now, changes)

    def record_step(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, name: str,
        value: str, duration: float,
    ) -> bool:  # fmt: skip
        # One statement: its FOR UPDATE (where the database has it; InnoDB's INSERT ...
        # SELECT reads without locks under READ COMMITTED otherwise) holds the claim until
        # the commit. The row by its primary key; uniqueness by alkqueue_jobstep_name.
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        at = connection.ops.adapt_datetimefield_value(now)
        token = QueueMessage._meta.get_field("claim_token").get_db_prep_value(
            claim.token, connection
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {STEP_TABLE} (job_id, name, value, recorded_at, attempt, duration) "
                f"SELECT id, %s, %s, %s, attempts, %s FROM {MESSAGE_TABLE} "
                f"WHERE id = %s AND claim_token = %s AND lease_expires_at > %s{lock}",
                [name, value, at, duration, claim.id, token, at],
            )
            return bool(cursor.rowcount == 1)

    def load_claimed_steps(
        self, connection: BaseDatabaseWrapper, claims: Sequence[Claim], now: datetime
    ) -> dict[int, dict[str, str]]:
        # The base's statement, with `now` and the tokens bound and read as the ORM does.
        field = QueueMessage._meta.get_field("claim_token")
        return self._claimed_steps(
            connection, claims, connection.ops.adapt_datetimefield_value(now),
            lambda token: field.get_db_prep_value(token, connection), field.to_python,
        )  # fmt: skip

    def release(self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime) -> bool:
        return self._unclaim(connection, claim, now, {"run_at": now, "attempts": F("attempts") - 1})

    def snooze(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, run_at: datetime
    ) -> bool:
        refunded = {"run_at": run_at, "attempts": F("attempts") - 1}
        return self._unclaim(connection, claim, now, refunded)

    def _unclaim(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime,
        changes: dict[str, Any],
    ) -> bool:  # fmt: skip
        """A valid claim given up: the row pending again, with `changes` on top."""
        valid = self._live(connection).filter(by_claim(*claim, now))
        return (
            valid.update(
                claim_token=None, claimed_by=None, claimed_at=None, lease_expires_at=None, **changes
            )
            == 1
        )

    def heartbeat(
        self,
        connection: BaseDatabaseWrapper,
        heartbeats: Sequence[tuple[Claim, datetime]],
        now: datetime,
        progress: Mapping[Claim, Progress] | None = None,
    ) -> list[Claim]:
        expiry = dict(heartbeats)
        reports = progress or {}
        extended: list[Claim] = []
        with transaction.atomic(using=connection.alias, savepoint=False):
            self._write_lock_first(connection)
            # Rows an atomic handler's transaction holds are skipped, not waited for: a
            # heartbeat must never stall behind a running handler.
            ids = [claim.id for claim in expiry]
            for chunk in chunks(ids):
                valid = self._held(connection, chunk, now)
                held = [claim for claim in valid if claim in expiry]
                self._heartbeat(connection, held, expiry, reports)
                extended.extend(held)
        return extended

    def _heartbeat(
        self, connection: BaseDatabaseWrapper, claims: Sequence[Claim],
        expiry: Mapping[Claim, datetime], reports: Mapping[Claim, Progress],
    ) -> None:  # fmt: skip
        """Write the new expiry of `claims`, whose rows _held locked: one UPDATE for all
        that share an expiry (one per lease length), one per job with a progress report.
        A statement per job held its locks for thousands of round trips, long enough for
        the leases to lapse under it (docs/databases.md, "Heartbeats")."""
        by_expiry: dict[datetime, list[int]] = {}
        for claim in claims:
            if claim in reports:
                self._live(connection).filter(id=claim.id).update(
                    lease_expires_at=expiry[claim], **progress_columns(reports, claim)
                )
            else:
                by_expiry.setdefault(expiry[claim], []).append(claim.id)
        for expires, ids in by_expiry.items():
            self._live(connection).filter(id__in=ids).update(lease_expires_at=expires)

    # -- maintenance -----------------------------------------------------------------------

    def reclaim(
        self, connection: BaseDatabaseWrapper, now: datetime
    ) -> tuple[list[int], list[Row]]:
        live = self._live(connection)
        lapsed = live.filter(
            claim_token__isnull=False, lease_expires_at__lte=now, attempts__lt=F("max_attempts")
        )
        with transaction.atomic(using=connection.alias, savepoint=False):
            self._write_lock_first(connection)
            exhausted = live.filter(lapsed_exhausted(now)).select_for_update(skip_locked=True)
            reason = MAX_ATTEMPTS_EXCEEDED
            dead = self.dead_letter(connection, list(exhausted.values_list("id", flat=True)),
                                    now, reason, reason)  # fmt: skip
            ids = list(lapsed.select_for_update(skip_locked=True).values_list("id", flat=True))
            for chunk in chunks(ids):
                lapsed.filter(id__in=chunk).update(
                    claim_token=None, claimed_by=None, claimed_at=None, lease_expires_at=None
                )
        return ids, dead

    def delete_old_dead_letters(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        # One DELETE per distinct retention (a handful: one per consumer's setting), each a
        # plain cutoff on died_at, instead of date arithmetic that differs per database.
        dead = DeadLetter.objects.using(connection.alias).filter(retention__isnull=False)
        retentions = dead.order_by().values_list("retention", flat=True).distinct()
        deleted = 0
        for kept in [kept for kept in retentions if kept is not None]:
            cutoff = now - timedelta(seconds=kept)
            deleted += dead.filter(retention=kept, died_at__lt=cutoff).delete()[0]
        return deleted

    def fail(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        reason: str,
        error: str,
    ) -> Row | None:
        rows = self._dead_letter_where(connection, by_claim(*claim, now), now, reason, error)
        return rows[0] if rows else None

    def crashed(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        limit: int,
        retry: CrashRetry,
    ) -> tuple[bool, Row | None]:
        with transaction.atomic(using=connection.alias, savepoint=False):
            last = by_claim(*claim, now) & Q(crashes__gte=limit - 1)
            error = retry.error or CRASHED_ITS_WORKER
            dead = self._dead_letter_where(connection, last, now, CRASHED_ITS_WORKER, error)
            if dead:
                return True, dead[0]
            if retry.out_of_attempts:
                row = self.fail(connection, claim, now, MAX_ATTEMPTS_EXCEEDED,
                                retry.error or MAX_ATTEMPTS_EXCEEDED)  # fmt: skip
                return row is not None, row
            changes: dict[str, Any] = {"run_at": retry.run_at, "crashes": F("crashes") + 1}
            if retry.error is not None:
                changes["last_error"] = retry.error
            return self._unclaim(connection, claim, now, changes), None

    def sweep_expired(
        self, connection: BaseDatabaseWrapper, queue: str | None, now: datetime, reason: str
    ) -> list[Row]:
        return self._dead_letter_where(connection, expired(now, queue), now, reason, reason)

    def _dead_letter_where(
        self, connection: BaseDatabaseWrapper, condition: Q, now: datetime, reason: str,
        error: str,
    ) -> list[Row]:  # fmt: skip
        """dead_letter() for the live rows matching `condition`, locked first."""
        with transaction.atomic(using=connection.alias, savepoint=False):
            self._write_lock_first(connection)
            matching = self._live(connection).filter(condition).select_for_update()
            ids = list(matching.values_list("id", flat=True))
            return self.dead_letter(connection, ids, now, reason, error)

    def dead_letter(
        self,
        connection: BaseDatabaseWrapper,
        ids: Sequence[int],
        now: datetime,
        reason: str,
        error: str,
    ) -> list[Row]:
        # Per chunk: the rows read and locked, their dead letters written, the rows deleted.
        live = self._live(connection)
        dead: list[Row] = []
        with transaction.atomic(using=connection.alias, savepoint=False):
            for chunk in chunks(list(ids)):
                dying = dying_rows(live.filter(id__in=chunk).select_for_update())
                if not dying:
                    continue
                letters = [as_dead_letter(*pair, now, reason, error) for pair in dying]
                DeadLetter.objects.using(connection.alias).bulk_create(letters)
                live.filter(id__in=[row[0] for row, _ in dying]).delete()
                dead.extend(as_dead_row(row, now, reason, error) for row, _ in dying)
        return dead

    # -- queue statistics ------------------------------------------------------------------

    def add_queue_stat_deltas(
        self,
        connection: BaseDatabaseWrapper,
        minute: datetime,
        deltas: Sequence[queue_stat_deltas.Delta],
    ) -> None:
        queue_stat_deltas.add_by_orm(connection, minute, deltas)

    def add_fair_claims(
        self, connection: BaseDatabaseWrapper, queue: str, at: datetime, counts: Mapping[str, int]
    ) -> None:
        if not self.on_duplicate_key:
            super().add_fair_claims(connection, queue, at, counts)
            return
        fair_claims.add(connection, fair_claims.ADD_ON_DUPLICATE_KEY, queue, at, counts)


def progress_columns(reports: Mapping[Claim, Progress], claim: Claim) -> dict[str, Any]:
    """The progress columns a heartbeat writes for `claim`: none when it has no new report."""
    report = reports.get(claim)
    if report is None:
        return {}
    return {"progress": report.stored(), "progress_at": report.updated_at}
