"""What every vendor's SQL shares: the row shape, the predicates, the reads, the conversions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from .. import payload as payload_codec
from ..history import Finish, kept_job, row_of
from ..jobs import Job, Progress, Stamps, State, live_state, make_job
from ..models import DEAD_LETTER_TABLE, MESSAGE_TABLE, FinishedJob
from . import queue_stat_deltas, workflow_rows
from .locks import SessionLock

if TYPE_CHECKING:
    from ..limits import Limits

# One row shape for live jobs and dead letters alike; `Job` is built from it.
ROW_FIELDS = (
    "id", "queue", "payload", "priority", "attempts", "max_attempts", "backoff_base", "lease",
    "retention", "run_at", "enqueued_at", "expires_at", "unique_key", "claim_token",
    "claimed_by", "claimed_at", "lease_expires_at", "last_error", "died_at", "reason",
    "concurrency_key", "trace_context", "requeued_at",
)  # fmt: skip
INSERT_FIELDS = (
    "queue", "payload", "priority", "attempts", "max_attempts", "backoff_base", "lease",
    "retention", "run_at", "enqueued_at", "expires_at", "trace_context", "unique_key",
)  # fmt: skip
# A job without a unique key leaves that column out (NULL); it comes last, so its values are
# insert_values()' first len(KEYLESS_INSERT_FIELDS).
KEYLESS_INSERT_FIELDS = INSERT_FIELDS[:-1]
# The columns a dead letter copies from the live row it replaces.
BURIED_FIELDS = (
    "queue", "payload", "priority", "attempts", "max_attempts", "backoff_base", "lease",
    "retention", "run_at", "enqueued_at", "expires_at", "unique_key", "claimed_by", "claimed_at",
    "concurrency_key", "trace_context", "requeued_at",
)  # fmt: skip

# The columns of a kept job (models.FinishedJob), in the order the acks write them.
KEPT_FIELDS = (
    "job_id", "queue", "payload", "priority", "attempts", "max_attempts", "backoff_base",
    "lease", "unique_key", "concurrency_key", "last_error", "enqueued_at", "started_at",
    "finished_at", "duration", "worker_id", "outcome", "output", "output_error", "delete_after",
)  # fmt: skip

LIVE_COLUMNS = ", ".join(ROW_FIELDS[:18])
#: A live row in the row shape: no death, then its concurrency key, trace context and requeue.
LIVE_ROW = f"{LIVE_COLUMNS}, NULL, NULL, concurrency_key, trace_context, requeued_at"
DEAD_COLUMNS = (
    "job_id, queue, payload, priority, attempts, max_attempts, backoff_base, lease, retention, "
    "run_at, enqueued_at, expires_at, unique_key, NULL, claimed_by, claimed_at, NULL, "
    "last_error, died_at, reason, concurrency_key, trace_context, requeued_at"
)

# A claim is valid while the row carries its token and the lease has not lapsed.
BY_CLAIM = "id = %s AND claim_token = %s AND lease_expires_at > %s"


T = TypeVar("T")


# A TypeVar, not PEP 695's syntax: make test-compat runs the source on Python 3.11.
def chunked(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:  # noqa: UP047
    """`items` in slices of at most `size`, in order: every list of ids that reaches SQL
    goes out in such slices (Dialect.ids_per_statement), so no statement outgrows the
    database's limit on bound parameters however long the list."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _in_queue(job_id: int, queue: str | None) -> tuple[str, list[Any]]:
    if queue is None:
        return "", [job_id]
    return " AND queue = %s", [job_id, queue]


def insert_values(queue: str, text: str, stamps: Stamps) -> tuple[Any, ...]:
    """One row in INSERT_FIELDS order."""
    return (
        queue, text, stamps.priority, 0, stamps.max_attempts, stamps.backoff_base, stamps.lease,
        stamps.retention, stamps.run_at, stamps.enqueued_at, stamps.expires_at,
        stamps.trace_context, stamps.unique_key,
    )  # fmt: skip


class Claim(NamedTuple):
    """What fences a state change: the job id and the claim token handed out with it."""

    id: int
    token: uuid.UUID


Row = tuple[Any, ...]

_Done = TypeVar("_Done", Claim, int)


class Acked(NamedTuple, Generic[_Done]):  # noqa: UP046 (make test-compat runs Python 3.11)
    """What an ack deleted: its claims (ack) or ids (ack_batch), and the ids among them whose
    rows were marked in_workflow, for workflows/finishing.py to settle after the statement."""

    done: list[_Done]
    in_workflows: list[int]

    def add(self, item: _Done, marked: object) -> None:
        """One deleted row: its claim or id, and whether its row was marked in_workflow."""
        self.done.append(item)
        if marked:
            self.in_workflows.append(item.id if isinstance(item, Claim) else item)


def returned_claim(row: Row) -> Claim:
    """The claim in a row returned as (id, claim_token); SQLite stores the token as hex."""
    token = row[1]
    return Claim(row[0], token if isinstance(token, uuid.UUID) else uuid.UUID(token))


#: Writes one chunk of payload texts as new rows (insert_many); returns their ids in order.
WriteChunk = Callable[[Sequence[str]], list[int]]
#: Waits up to the given seconds for wake-ups (Dialect.listen); returns their queue names.
Notifications = Callable[[float], list[str]]


class Dialect:
    """Base of the vendor dialects: conversions and the reads that are plain SQL everywhere.

    What a database can do is declared here as `supports_*` attributes (as Django's task
    backends declare theirs); code outside `sql/` reads them instead of the vendor's name.
    """

    #: LISTEN/NOTIFY wake-ups; elsewhere workers find new jobs by polling.
    supports_notify = False
    #: Session-level advisory locks, which the server frees when the session ends (leader):
    #: true where the dialect has a session_lock.
    supports_advisory_locks = False
    #: A planner row estimate for a query, so a long changelist need not count its rows.
    supports_planner_estimates = False
    #: Catalog statistics (dead tuples, old transactions, replication slots) for health checks.
    supports_catalog_health = False
    #: The most ids (or claims) one statement binds: longer lists go out in chunks of this
    #: size. SQLite's default build allows 32,766 bound parameters, old builds 999.
    ids_per_statement = 400
    #: InnoDB's history list length, the MVCC backlog of MySQL and MariaDB (sql/innodb.py).
    supports_undo_history = False
    #: The leader's session lock (sql/locks.py), where the vendor has one.
    session_lock: SessionLock | None = None
    #: UPDATE ... RETURNING (PostgreSQL, SQLite); elsewhere a read, then the UPDATE.
    supports_update_returning = False

    def param_datetime(self, connection: BaseDatabaseWrapper, value: datetime | None) -> Any:
        return value

    def param_token(self, token: uuid.UUID) -> Any:
        return token

    def read_datetime(self, value: Any) -> datetime | None:
        return value  # type: ignore[no-any-return]

    def read_token(self, value: Any) -> uuid.UUID | None:
        return value  # type: ignore[no-any-return]

    def all_or_nothing(
        self, connection: BaseDatabaseWrapper, ids: int
    ) -> AbstractContextManager[object]:
        """One transaction around a write of `ids` ids when it takes more than one statement;
        a single statement is atomic already, and a transaction around it costs two round
        trips."""
        if ids > self.ids_per_statement:
            return transaction.atomic(using=connection.alias)
        return nullcontext()

    # -- rows ------------------------------------------------------------------------------

    def to_job(self, row: Row, now: datetime) -> Job:
        # Unpacked by position (ROW_FIELDS order): the claim builds one Job per handed-out
        # row, and a dict per row would be built only to be thrown away.
        (
            job_id, queue, payload, priority, attempts, max_attempts, backoff_base, lease,
            retention, run_at, enqueued_at, expires_at, unique_key, token, claimed_by,
            claimed_at, lease_expires_at, last_error, died_at, reason, concurrency_key,
            trace_context, requeued_at,
        ) = row  # fmt: skip
        read = self.read_datetime
        # run_at and enqueued_at are NOT NULL columns.
        run_at = cast(datetime, read(run_at))
        died_at = read(died_at)
        state: State
        if died_at is not None:
            state = "dead"
        else:
            state = live_state(self.read_token(token) is not None, run_at, now)
        # SQLite hands back REAL columns as ints when they hold whole numbers.
        return make_job({
            "id": job_id, "queue": queue, "payload": payload_codec.decode(payload),
            "state": state, "priority": priority, "attempts": attempts,
            "max_attempts": max_attempts, "backoff_base": float(backoff_base),
            "lease": float(lease), "run_at": run_at, "enqueued_at": read(enqueued_at),
            "expires_at": read(expires_at), "unique_key": unique_key, "claimed_by": claimed_by,
            "lease_expires_at": read(lease_expires_at), "last_error": last_error,
            "died_at": died_at, "claimed_at": read(claimed_at), "reason": reason,
            "retention": None if retention is None else float(retention),
            "concurrency_key": concurrency_key, "trace_context": trace_context,
            "requeued_at": read(requeued_at),
        })  # fmt: skip

    # -- reads -----------------------------------------------------------------------------

    def select_job(
        self, connection: BaseDatabaseWrapper, job_id: int, queue: str | None
    ) -> Row | None:
        """The live job or dead letter with this id (in this queue, when one is named)."""
        scope, params = _in_queue(job_id, queue)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {LIVE_ROW} FROM {MESSAGE_TABLE} WHERE id = %s{scope}",
                params,
            )
            row = cursor.fetchone()
            if row is None:
                cursor.execute(
                    f"SELECT {DEAD_COLUMNS} FROM {DEAD_LETTER_TABLE} WHERE job_id = %s{scope}",
                    params,
                )
                row = cursor.fetchone()
        return None if row is None else tuple(row)

    def select_live_by_key(
        self, connection: BaseDatabaseWrapper, queue: str, key: str
    ) -> Row | None:
        """The live job holding `key` (index alkqueue_live_unique_key)."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {LIVE_ROW} FROM {MESSAGE_TABLE} WHERE queue = %s AND unique_key = %s",
                [queue, key],
            )
            row = cursor.fetchone()
        return None if row is None else tuple(row)

    def take_dead_letter(
        self, connection: BaseDatabaseWrapper, job_id: int, queue: str | None
    ) -> Row | None:
        """Delete a dead letter and return it (the first half of a requeue)."""
        scope, params = _in_queue(job_id, queue)
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {DEAD_LETTER_TABLE} WHERE job_id = %s{scope} "
                f"RETURNING {DEAD_COLUMNS}",
                params,
            )
            row = cursor.fetchone()
        return None if row is None else tuple(row)

    def lock_claim(self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime) -> bool:
        """Inside a transaction: lock a validly claimed row (a no-op UPDATE takes the row lock
        on PostgreSQL and the write lock on SQLite), so the claim holds until commit."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {MESSAGE_TABLE} SET claimed_at = claimed_at WHERE {BY_CLAIM}",
                [claim.id, self.param_token(claim.token), self.param_datetime(connection, now)],
            )
            return bool(cursor.rowcount == 1)

    def notify(self, connection: BaseDatabaseWrapper, queue: str) -> None:
        """Wake idle workers of `queue` (PostgreSQL NOTIFY; nothing elsewhere)."""

    def listen(
        self,
        connection: BaseDatabaseWrapper,
        cancels: tuple[str, Callable[[int], object]] | None = None,
    ) -> AbstractContextManager[Notifications]:
        """A session of its own, with `connection`'s settings, receiving the wake-ups that
        notify() sends; only where supports_notify. With `cancels` (a worker id and a
        callback), the ids of the jobs notify_cancel() names to that worker go to the
        callback as they come."""
        raise NotImplementedError

    def notify_cancel(self, connection: BaseDatabaseWrapper, worker_id: str, job_id: int) -> None:
        """Tell `worker_id` at once that the job it runs was cancelled (PostgreSQL NOTIFY, sent
        at commit; nothing elsewhere, where the worker's next lease renewal finds out)."""

    def dead_tuples(self, connection: BaseDatabaseWrapper) -> int | None:
        """Dead row versions in the live table, as the server counts them; None where the
        server keeps no such count (SQLite reuses freed pages itself)."""
        return None

    def table_dead_tuples(
        self, connection: BaseDatabaseWrapper, tables: Sequence[str]
    ) -> dict[str, int] | None:
        """Per table of `tables`, its dead row versions as the server counts them (a
        partitioned table's partitions summed into its own); None where the server keeps no
        such count."""
        return None

    def undo_history_length(self, connection: BaseDatabaseWrapper) -> int | None:
        """Undo records not yet purged (supports_undo_history); None when unreadable."""
        return None

    def vacuum(self, connection: BaseDatabaseWrapper) -> None:
        """Reclaim the live table's dead row versions (PostgreSQL VACUUM; nothing elsewhere)."""

    def statistics_say_empty(self, connection: BaseDatabaseWrapper) -> bool:
        """Whether the planner's statistics take the live table for empty while it holds
        rows (PostgreSQL); False where no such statistics mislead."""
        return False

    def analyze(self, connection: BaseDatabaseWrapper) -> None:
        """Take the live table's planner statistics again (PostgreSQL ANALYZE)."""

    def vacuum_horizon(self, connection: BaseDatabaseWrapper) -> str | None:
        """The oldest transaction that keeps dead row versions from a VACUUM, as a token to
        compare with an earlier one (PostgreSQL); None when none is known."""
        return None

    def highest_job_id(self, connection: BaseDatabaseWrapper) -> int:
        """The highest job id handed out so far (sql/workflow_rows.py)."""
        return workflow_rows.highest_job_id(connection)

    def finish_batch_members(
        self, connection: BaseDatabaseWrapper, job_ids: Sequence[int], outcome: str
    ) -> set[int]:
        """Set the outcome of these jobs' unfinished batch member rows; returns the batches
        they are in (sql/workflow_rows.py)."""
        returning = self.supports_update_returning
        return workflow_rows.finish_batch_members(connection, job_ids, outcome, returning)

    def try_leader_lock(self, connection: BaseDatabaseWrapper) -> bool:
        """Take the leader's session lock without waiting (supports_advisory_locks only)."""
        assert self.session_lock is not None
        return self.session_lock.try_lock(connection)

    def release_leader_lock(self, connection: BaseDatabaseWrapper) -> None:
        assert self.session_lock is not None
        self.session_lock.release(connection)

    def add_queue_stat_deltas(
        self,
        connection: BaseDatabaseWrapper,
        minute: datetime,
        deltas: Sequence[queue_stat_deltas.Delta],
    ) -> None:
        """Add each queue's (finished, failed) to its row of `minute`, creating it if new."""
        queue_stat_deltas.add_by_upsert(connection, minute, deltas)

    # -- the state changes each vendor writes its own way ----------------------------------

    def insert_many(
        self, connection: BaseDatabaseWrapper, queue: str, stamps: Stamps, count: int
    ) -> AbstractContextManager[WriteChunk]:
        """One transaction inserting up to `count` live jobs, all with the same stamps and
        no unique key. The block writes the payload texts through the function it is given,
        chunk by chunk, and gets each chunk's ids back in input order. Rows go out as each
        chunk is written, so where the server takes them in while the caller goes on (COPY),
        the caller's work on the next chunk overlaps the server's on this one. An exception
        in the block rolls every row back."""
        raise NotImplementedError

    def insert_unique(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int | None:
        """Insert one job with stamps.unique_key; None when a live job holds that key."""
        raise NotImplementedError

    def insert_one(
        self, connection: BaseDatabaseWrapper, queue: str, text: str, stamps: Stamps
    ) -> int:
        """Insert one job without a unique key, in one statement; returns its id."""
        job_id = self.insert_unique(connection, queue, text, stamps)
        assert job_id is not None  # no unique key: nothing to conflict with
        return job_id

    def claim(
        self, connection: BaseDatabaseWrapper, queue: str, worker_id: str, n: int, now: datetime
    ) -> tuple[list[tuple[Job, Claim]], list[Job]]:
        """Claim up to n due jobs; returns (each job and its claim, in handout order; the jobs
        dead-lettered on the way)."""
        raise NotImplementedError

    def limited_claim(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        worker_id: str,
        n: int,
        now: datetime,
        limits: Limits,
        clock: Callable[[], datetime] | None,
    ) -> tuple[list[tuple[Job, Claim]], list[Job]]:
        """claim() for a queue with limits, through its gate (docs/flow-control.md): written
        once with the ORM (sql/limited_claim.py), unless the dialect has its own."""
        from . import limited_claim  # it builds on the ORM dialect, which builds on this

        return limited_claim.claim(connection, queue, worker_id, n, now, limits, clock)

    def ack(
        self,
        connection: BaseDatabaseWrapper,
        claims: Sequence[Claim],
        now: datetime,
        finishes: Sequence[Finish | None] | None = None,
    ) -> Acked[Claim]:
        """Delete the jobs whose claims are still valid; returns those claims. Claims, not
        ids: one worker can hold an old lapsed claim and the new claim of the same job.

        `finishes`, when given, holds one entry per claim: each acked job with a Finish is
        also written to the history (outcome "succeeded") in the same transaction."""
        raise NotImplementedError

    def keep_finished(
        self, connection: BaseDatabaseWrapper, jobs: Sequence[Job], outcome: str,
        now: datetime, finishes: Sequence[Finish],
    ) -> None:  # fmt: skip
        """Write each job (its live row gone already) to the history with `outcome`."""
        rows = [row_of(job, outcome, now, done) for job, done in zip(jobs, finishes, strict=True)]
        FinishedJob.objects.using(connection.alias).bulk_create(rows)

    def select_kept(
        self, connection: BaseDatabaseWrapper, job_id: int, queue: str | None
    ) -> Job | None:
        """The kept job with this id (in this queue, when one is named): the primary key."""
        kept = FinishedJob.objects.using(connection.alias).filter(job_id=job_id)
        row = (kept if queue is None else kept.filter(queue=queue)).first()
        return None if row is None else kept_job(row)

    def prepare_history(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        """Make room for the history ahead of `now` (PostgreSQL: the day partitions);
        returns how many partitions were created."""
        return 0

    def sweep_history(self, connection: BaseDatabaseWrapper, now: datetime, batch: int) -> int:
        """Delete kept jobs past their delete_after, `batch` rows per statement (each its own
        transaction); returns how many were deleted."""
        kept = FinishedJob.objects.using(connection.alias)
        size = min(batch, self.ids_per_statement)
        deleted = 0
        while True:
            ids = list(
                kept.filter(delete_after__lte=now).order_by("delete_after")
                .values_list("job_id", flat=True)[:size]
            )  # fmt: skip
            if not ids:
                return deleted
            deleted += kept.filter(job_id__in=ids, delete_after__lte=now).delete()[0]

    def ack_batch(
        self, connection: BaseDatabaseWrapper, queue: str, ids: Sequence[int], now: datetime,
        done: Finish | None = None,
    ) -> Acked[int]:  # fmt: skip
        """Delete the queue's claimed jobs with a live lease, whoever holds them; returns
        the ids deleted. With `done` (the queue keeps), each is also written to the history,
        without output, in the same transaction."""
        raise NotImplementedError

    def retry(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        run_at: datetime,
        error: str | None,
    ) -> bool:
        """Give a valid claim up: pending again from run_at, the attempt still counted, the
        error (when one is given) stored."""
        raise NotImplementedError

    def release(self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime) -> bool:
        """Give a valid claim up unfinished: pending now, the attempt refunded."""
        raise NotImplementedError

    def snooze(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, run_at: datetime
    ) -> bool:
        """Give a valid claim up for later: pending from run_at, the attempt refunded, the
        last error kept."""
        raise NotImplementedError

    def heartbeat(
        self,
        connection: BaseDatabaseWrapper,
        renewals: Sequence[tuple[Claim, datetime]],
        now: datetime,
        progress: Mapping[Claim, Progress] | None = None,
    ) -> list[Claim]:
        """Set each valid claim's lease_expires_at, and its progress when `progress` holds
        a new report for it, in the same statement; returns the claims renewed."""
        raise NotImplementedError

    def delete_old_dead_letters(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        """Delete dead letters older than the retention stamped on them."""
        raise NotImplementedError

    def fail(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        reason: str,
        error: str,
    ) -> Row | None:
        """Move a validly claimed job to the dead letters; returns its dead row, or None
        when the claim is no longer valid."""
        raise NotImplementedError

    def sweep_expired(
        self, connection: BaseDatabaseWrapper, queue: str | None, now: datetime, reason: str
    ) -> list[Row]:
        """Move the expired live jobs (any state) of `queue`, or of every queue when None, to
        the dead letters with `reason`; returns the dead rows."""
        raise NotImplementedError

    def reclaim(
        self, connection: BaseDatabaseWrapper, now: datetime
    ) -> tuple[list[int], list[Row]]:
        """Lapsed claims: back to pending with attempts left, else to the dead letters
        ("max attempts exceeded"). Returns (the ids made pending, the dead rows)."""
        raise NotImplementedError
