"""What every vendor's SQL shares: the row shape, the predicates, the reads, the conversions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from .. import fair_share
from .. import payload as payload_codec
from ..conf import get_settings
from ..jobs import HistoryEntry, Job, Progress, Stamps, State, live_state, make_job
from ..limit_values import Limits
from ..models import (
    DEAD_LETTER_TABLE,
    HISTORY_TABLE,
    MESSAGE_TABLE,
    SIGNAL_TABLE,
    STEP_TABLE,
    FinishedJob,
)
from . import (
    fair_claims,
    leader_rows,
    local_wakeups,
    queue_scans,
    queue_stat_deltas,
    unique_windows,
    workflow_rows,
)
from .history_rows import history_job, row_of
from .locks import SessionLock

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
# The columns a dead letter copies from the live row it replaces; the fair key too, which the
# row shape does not carry, so that a requeued job takes its turns again.
DEAD_LETTER_FIELDS = (
    "queue", "payload", "priority", "attempts", "max_attempts", "backoff_base", "lease",
    "retention", "run_at", "enqueued_at", "expires_at", "unique_key", "claimed_by", "claimed_at",
    "concurrency_key", "trace_context", "requeued_at", "fair_key",
)  # fmt: skip


def dead_letter_values(died_at: str) -> str:
    """The values of DEAD_LETTER_FIELDS, in order, from the live row being taken, with
    `died_at` the SQL (a placeholder) of the time it dies: a job that dies waiting has no
    run_at, and its dead letter takes that time instead (docs/workflows.md)."""
    return ", ".join(
        f"COALESCE(run_at, {died_at})" if name == "run_at" else name for name in DEAD_LETTER_FIELDS
    )


# The columns of a job in the history (models.FinishedJob), in the order the acks write them.
HISTORY_FIELDS = (
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


def gather_steps(
    loaded: dict[int, dict[str, str]],
    rows: Iterable[Row],
    claims: Collection[Claim],
    read_token: Callable[[Any], uuid.UUID | None],
) -> None:
    """Add the rows (job id, claim token, step name, value) of a read of claimed jobs' steps
    to `loaded`, by job id, for the rows whose job still carries its claim of `claims` (the
    statement matched ids and tokens each on its own); a job with no steps comes as one row
    with no name (a LEFT JOIN)."""
    for job_id, stored, name, value in rows:
        token = read_token(stored)
        if token is None or Claim(job_id, token) not in claims:
            continue
        steps = loaded.setdefault(job_id, {})
        if name is not None:
            steps[name] = value


def ping(connection: BaseDatabaseWrapper) -> None:
    """Run a trivial statement: whatever the driver raises says the database is not there."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


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


class TakenDeadLetter(NamedTuple):
    """A dead letter deleted for its requeue: its row (the row shape) and its fair key, which
    the row shape does not carry and the requeue writes back on the live row."""

    row: Row
    fair_key: str | None


class CrashRetry(NamedTuple):
    """How a job whose handler took its worker down goes back (Dialect.crashed): due from
    `run_at`, with `error` as its last error (None keeps the last one), unless it has no
    attempt left."""

    run_at: datetime
    error: str | None = None
    out_of_attempts: bool = False


class Claimed(NamedTuple):
    """What a claim did: each job it handed out with its claim (in handout order), the jobs
    it dead-lettered on the way, and for a queue with limits what they did."""

    handed: list[tuple[Job, Claim]]
    dead: list[Job]
    #: It came back short, and the queue's limits may be why, not only an empty queue: its
    #: queue-wide room was below what it asked for, or a key limit is set.
    held_back: bool = False
    #: Seconds until the queue's rate frees room, when it came back short with the rate's
    #: window spent; else None.
    room_in: float | None = None


_Done = TypeVar("_Done", Claim, int)


class Acked(NamedTuple, Generic[_Done]):  # noqa: UP046 (make test-compat runs Python 3.11)
    """What an ack deleted: its claims (ack) or ids (ack_batch), and the ids among them whose
    rows were marked in_workflow, for workflows/finishing.py to settle in the same
    transaction (operations.ack)."""

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

    #: LISTEN/NOTIFY wake-ups, which reach every host and carry cancels; elsewhere the
    #: workers of the enqueuing host are woken through sockets (sql/local_wakeups.py), the
    #: others poll, and a cancel reaches its worker at the next heartbeat.
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
        run_at = read(run_at)  # NULL: the job waits
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
    ) -> TakenDeadLetter | None:
        """Delete a dead letter and return it (the first half of a requeue)."""
        scope, params = _in_queue(job_id, queue)
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {DEAD_LETTER_TABLE} WHERE job_id = %s{scope} "
                f"RETURNING {DEAD_COLUMNS}, fair_key",
                params,
            )
            row = cursor.fetchone()
        return None if row is None else TakenDeadLetter(tuple(row[:-1]), row[-1])

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
        """Wake idle workers of `queue` once the caller's transaction commits: PostgreSQL's
        NOTIFY; elsewhere the workers of this host (sql/local_wakeups.py)."""
        local_wakeups.wake(connection, queue, get_settings().WAKEUP_DIRECTORY)

    def wake_after_insert(self, connection: BaseDatabaseWrapper, queue: str, single: bool) -> None:
        """notify() after an enqueue's INSERT (PostgreSQL's statements carry their own
        NOTIFY); a `single` job's wake-up is paced by ALKQUEUE["NOTIFY_WINDOW"]."""
        settings = get_settings()
        if single:
            local_wakeups.wake_paced(
                connection, queue, settings.WAKEUP_DIRECTORY, settings.NOTIFY_WINDOW
            )
        else:
            local_wakeups.wake(connection, queue, settings.WAKEUP_DIRECTORY)

    def listen(
        self,
        connection: BaseDatabaseWrapper,
        cancels: tuple[str, Callable[[int], object]] | None = None,
    ) -> AbstractContextManager[Notifications]:
        """Receive the wake-ups that notify() sends: PostgreSQL's LISTEN on a session of its
        own, with `connection`'s settings; elsewhere this process's socket in the database's
        wake-up directory. With `cancels` (a worker id and a callback; only where
        supports_notify), the ids of the jobs notify_cancel() names to that worker go to the
        callback as they come."""
        return local_wakeups.inbox(connection, get_settings().WAKEUP_DIRECTORY)

    def notify_cancel(self, connection: BaseDatabaseWrapper, worker_id: str, job_id: int) -> None:
        """Tell `worker_id` at once that the job it runs was cancelled (PostgreSQL NOTIFY, sent
        at commit; nothing elsewhere, where the worker's next heartbeat finds out)."""

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

    def known_queues(self, connection: BaseDatabaseWrapper) -> list[str]:
        """Every queue named by a consumer, a live job or a dead letter, sorted, by index
        walks (sql/queue_scans.py)."""
        return queue_scans.known_queues(connection)

    def first_unclaimed_run_at(
        self, connection: BaseDatabaseWrapper, queues: Collection[str] | None
    ) -> dict[str, datetime]:
        """Per queue (of `queues`, when given) with unclaimed rows, their earliest run_at,
        by probes of alkqueue_pending_idx (sql/queue_scans.py)."""
        return queue_scans.first_unclaimed_run_at(connection, queues)

    def another_leader(
        self, connection: BaseDatabaseWrapper, worker_id: str, since: datetime
    ) -> bool:
        """Whether a Worker row other than `worker_id`'s, heartbeating at `since` or later,
        is marked leader (the mark of a database without session locks: sql/leader_rows.py)."""
        return leader_rows.another_leader(connection, worker_id, since)

    def mark_leader(self, connection: BaseDatabaseWrapper, worker_id: str) -> None:
        """Mark `worker_id`'s Worker row the leader and every other row not, in one statement."""
        leader_rows.mark_leader(connection, worker_id)

    def queue_table_stats(self, connection: BaseDatabaseWrapper) -> list[dict[str, Any]]:
        """The live table's and the dead letters' live and dead tuples and last vacuum, from
        the server's statistics (supports_catalog_health only)."""
        raise NotImplementedError

    def open_sessions(self, connection: BaseDatabaseWrapper) -> list[dict[str, Any]]:
        """The other sessions with a transaction or a snapshot open, oldest first (at most
        20): what holds back vacuum (supports_catalog_health only)."""
        raise NotImplementedError

    def replication_slots(self, connection: BaseDatabaseWrapper) -> list[dict[str, Any]]:
        """The server's replication slots and the xmin each holds back (supports_catalog_health
        only)."""
        raise NotImplementedError

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

    # -- durable steps (docs/durable-steps.md) ---------------------------------------------

    def record_step(
        self, connection: BaseDatabaseWrapper, claim: Claim, now: datetime, name: str,
        value: str, duration: float,
    ) -> bool:  # fmt: skip
        """Record a step of a validly claimed job, in one statement that locks its row first,
        so the claim holds until the record commits; False (nothing written) when the claim
        is no longer valid. The attempt recorded is the row's."""
        raise NotImplementedError

    def load_steps(self, connection: BaseDatabaseWrapper, job_id: int) -> dict[str, str]:
        """A job's recorded steps: each name's value, as JSON text. Walks the unique index
        alkqueue_jobstep_name (job_id, name)."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT name, value FROM {STEP_TABLE} WHERE job_id = %s", [job_id])
            return {name: value for name, value in cursor.fetchall()}

    def load_claimed_steps(
        self, connection: BaseDatabaseWrapper, claims: Sequence[Claim], now: datetime
    ) -> dict[int, dict[str, str]]:
        """The recorded steps of the jobs of `claims` whose claim is still valid at `now`,
        by job id (each name's value, as JSON text; {} for a job without steps); a job whose
        claim is no longer valid is left out. One statement per ids_per_statement claims: the
        rows by their primary key, their steps by alkqueue_jobstep_name's leading job_id."""
        at = self.param_datetime(connection, now)
        return self._claimed_steps(connection, claims, at, self.param_token, self.read_token)

    def _claimed_steps(
        self,
        connection: BaseDatabaseWrapper,
        claims: Sequence[Claim],
        at: Any,
        bind_token: Callable[[uuid.UUID], Any],
        read_token: Callable[[Any], uuid.UUID | None],
    ) -> dict[int, dict[str, str]]:
        """load_claimed_steps() with `now` and the tokens bound, and read, as this vendor
        binds and reads them."""
        loaded: dict[int, dict[str, str]] = {}
        wanted = set(claims)
        with connection.cursor() as cursor:
            for chunk in chunked(claims, self.ids_per_statement):
                tokens = list({claim.token for claim in chunk})  # one per claim statement
                cursor.execute(
                    f"SELECT m.id, m.claim_token, s.name, s.value FROM {MESSAGE_TABLE} m "
                    f"LEFT JOIN {STEP_TABLE} s ON s.job_id = m.id "
                    f"WHERE m.id IN ({', '.join(['%s'] * len(chunk))}) "
                    f"AND m.claim_token IN ({', '.join(['%s'] * len(tokens))}) "
                    "AND m.lease_expires_at > %s",
                    [*(claim.id for claim in chunk), *map(bind_token, tokens), at],
                )
                gather_steps(loaded, cursor.fetchall(), wanted, read_token)
        return loaded

    def delete_steps(self, connection: BaseDatabaseWrapper, job_ids: Sequence[int]) -> int:
        """Delete these jobs' steps and signals (alkqueue_jobstep_name and
        alkqueue_jobsignal_name, by their leading job_id). Returns the steps deleted."""
        self._delete_by_job(connection, SIGNAL_TABLE, job_ids)
        return self._delete_by_job(connection, STEP_TABLE, job_ids)

    def _delete_by_job(
        self, connection: BaseDatabaseWrapper, table: str, job_ids: Sequence[int]
    ) -> int:
        deleted = 0
        with connection.cursor() as cursor:
            for chunk in chunked(job_ids, self.ids_per_statement):
                marks = ", ".join(["%s"] * len(chunk))
                cursor.execute(f"DELETE FROM {table} WHERE job_id IN ({marks})", list(chunk))
                deleted += cursor.rowcount
        return deleted

    def sweep_steps(self, connection: BaseDatabaseWrapper, batch: int) -> int:
        """Delete the steps, then the signals, of up to `batch` jobs gone each: no live row
        (primary key), no dead letter (alkqueue_deadletter's job_id) and no history row
        (alkqueue_finishedjob's job_id). A job's steps and signals leave with its ack when
        it recorded steps; these are those of jobs cancelled, purged, expired as dead
        letters or past their keep in the history. Returns the rows deleted."""
        deleted = 0
        for table in (STEP_TABLE, SIGNAL_TABLE):
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT DISTINCT s.job_id FROM {table} s WHERE "
                    f"NOT EXISTS (SELECT 1 FROM {MESSAGE_TABLE} m WHERE m.id = s.job_id) AND "
                    f"NOT EXISTS (SELECT 1 FROM {DEAD_LETTER_TABLE} d WHERE d.job_id = s.job_id) "
                    f"AND NOT EXISTS (SELECT 1 FROM {HISTORY_TABLE} f WHERE f.job_id = s.job_id) "
                    f"LIMIT {int(batch)}"
                )
                gone = [row[0] for row in cursor.fetchall()]
            if gone:
                deleted += self._delete_by_job(connection, table, gone)
        return deleted

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

    def update_debounced(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        key: str,
        text: str,
        run_at: datetime,
        expires_at: datetime | None,
    ) -> Row | None:
        """The unclaimed job holding debounce `key`, updated in place: its payload `text`, its
        run_at moved to `run_at` or its debounce deadline, whichever comes first, its expiry
        to `expires_at`. Its row, or None when no unclaimed job holds the key
        (sql/debounce_rows.py)."""
        raise NotImplementedError

    def insert_debounced(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        text: str,
        stamps: Stamps,
        key: str,
        deadline: datetime | None,
    ) -> int | None:
        """Insert one job holding debounce `key`; None when an unclaimed job holds it."""
        raise NotImplementedError

    def is_deadlock(self, error: Exception) -> bool:
        """Whether `error` is a deadlock the database broke by rolling the whole transaction
        back, so that a caller outside any other transaction may run it again."""
        return False

    def lock_unique_window(
        self, connection: BaseDatabaseWrapper, queue: str, key: str, now: datetime
    ) -> int | None:
        """Lock unique `key`'s window until the caller's transaction ends: the id of the job
        whose window holds it, or None when none does (no window, or a lapsed one). SQLite,
        whose writers take turns anyway, reads nothing (sql/unique_windows.py)."""
        found = unique_windows.lock(connection, queue, key)
        return self._holder(found, now)

    def _holder(self, found: tuple[int, Any] | None, now: datetime) -> int | None:
        if found is None:
            return None
        lapses_at = self.read_datetime(found[1])
        return found[0] if lapses_at is not None and lapses_at > now else None

    def take_unique_window(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        key: str,
        job_id: int,
        now: datetime,
        lapses_at: datetime,
    ) -> int | None:
        """Take unique `key` for job `job_id` until `lapses_at`, in the caller's transaction:
        None when taken (new, or over a lapsed window), else the id of the job whose window
        holds it (sql/unique_windows.py)."""
        return unique_windows.take(
            connection, queue, key, job_id,
            self.param_datetime(connection, now), self.param_datetime(connection, lapses_at),
        )  # fmt: skip

    def sweep_unique_windows(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        """Delete the lapsed unique windows; returns how many."""
        return unique_windows.sweep(connection, now)

    # -- fair share (fair_share.py) and fair claims per key and bucket (sql/fair_claims.py) -

    def uses_fair_keys(self, connection: BaseDatabaseWrapper, queue: str) -> bool:
        """Whether the queue has an unclaimed job with a fair key (alkqueue_fair_key_idx)."""
        return fair_share.uses_fair_keys(queue, using=connection.alias)

    def add_fair_claims(
        self, connection: BaseDatabaseWrapper, queue: str, at: datetime, counts: Mapping[str, int]
    ) -> None:
        """Inside a fair claim: add the jobs it handed to each fair key to the key's bucket of
        `at`, in one statement (INSERT ... ON CONFLICT here; the ORM dialect's on MariaDB and
        MySQL is INSERT ... ON DUPLICATE KEY UPDATE)."""
        fair_claims.add(connection, fair_claims.ADD_ON_CONFLICT, queue, at, counts)

    def sweep_fair_claims(
        self, connection: BaseDatabaseWrapper, before: datetime, batch: int
    ) -> int:
        """Delete up to `batch` fair claim buckets that started before `before`."""
        return fair_claims.sweep(connection, before, batch)

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
    ) -> Claimed:
        """claim() for a queue with limits, through its gate (docs/flow-control.md), saying
        whether they held it back and when the rate frees room: written once with the ORM
        (sql/limited_claim.py, for SQLite and the ORM dialect), and once for PostgreSQL."""
        raise NotImplementedError

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
        """claim() for a queue that takes turns between fair keys (fair_share.py), with the
        key `weights` set, within `limits`: the steps of sql/limited_claim.py with the choice
        of sql/fair_turns.py, on every vendor."""
        raise NotImplementedError

    def ack(
        self,
        connection: BaseDatabaseWrapper,
        claims: Sequence[Claim],
        now: datetime,
        entries: Sequence[HistoryEntry | None] | None = None,
        plain_only: bool = False,
    ) -> Acked[Claim]:
        """Delete the jobs whose claims are still valid; returns those claims. Claims, not
        ids: one worker can hold an old lapsed claim and the new claim of the same job.

        `entries`, when given, holds one entry per claim: each acked job with a HistoryEntry is
        also written to the history (outcome "succeeded") in the same transaction.

        `plain_only`: leave the rows marked in_workflow live (their acks settle a workflow,
        so operations.ack acks them again inside a transaction with that settling)."""
        raise NotImplementedError

    def keep_finished(
        self, connection: BaseDatabaseWrapper, jobs: Sequence[Job], outcome: str,
        now: datetime, entries: Sequence[HistoryEntry],
    ) -> None:  # fmt: skip
        """Write each job (its live row gone already) to the history with `outcome`."""
        rows = [row_of(job, outcome, now, done) for job, done in zip(jobs, entries, strict=True)]
        FinishedJob.objects.using(connection.alias).bulk_create(rows)

    def select_history(
        self, connection: BaseDatabaseWrapper, job_id: int, queue: str | None
    ) -> Job | None:
        """The job in the history with this id (in this queue, when one is named): the
        primary key."""
        kept = FinishedJob.objects.using(connection.alias).filter(job_id=job_id)
        row = (kept if queue is None else kept.filter(queue=queue)).first()
        return None if row is None else history_job(row)

    def prepare_history(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        """Make room for the history ahead of `now` (PostgreSQL: the day partitions);
        returns how many partitions were created."""
        return 0

    def sweep_history(self, connection: BaseDatabaseWrapper, now: datetime, batch: int) -> int:
        """Delete jobs in the history past their delete_after, `batch` rows per statement
        (each its own transaction); returns how many were deleted."""
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
        done: HistoryEntry | None = None, plain_only: bool = False,
    ) -> Acked[int]:  # fmt: skip
        """Delete the queue's claimed jobs with a live lease, whoever holds them; returns
        the ids deleted. With `done` (the queue keeps), each is also written to the history,
        without output, in the same transaction. `plain_only` as in ack()."""
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
        heartbeats: Sequence[tuple[Claim, datetime]],
        now: datetime,
        progress: Mapping[Claim, Progress] | None = None,
    ) -> list[Claim]:
        """Set each valid claim's lease_expires_at, and its progress when `progress` holds
        a new report for it, in the same statement; returns the claims extended."""
        raise NotImplementedError

    def delete_old_dead_letters(self, connection: BaseDatabaseWrapper, now: datetime) -> int:
        """Delete dead letters older than the retention stamped on them."""
        raise NotImplementedError

    def dead_letter(
        self,
        connection: BaseDatabaseWrapper,
        ids: Sequence[int],
        now: datetime,
        reason: str,
        error: str,
    ) -> list[Row]:
        """The live rows with these ids -> dead letters (died_at `now`, `reason`, `error`),
        inside the caller's transaction, each row locked before it goes; ids no longer
        live are left out. Returns the dead letters in the row shape. Every death goes
        through this method or its dialect's statement for a condition (fail, crashed,
        sweep_expired, reclaim): docs/architecture.md, "Where each rule lives"."""
        raise NotImplementedError

    def park(
        self,
        connection: BaseDatabaseWrapper,
        job_id: int,
        run_at: datetime | None,
        signal: str | None = None,
    ) -> None:
        """A live job waits (its run_at NULL): never due until released, `run_at` kept in
        its WaitingJob row (None: a wait for a signal with no deadline), with the `signal`
        it waits for (waits.py), if any."""
        workflow_rows.park(connection, job_id, run_at, signal)

    def unpark(
        self, connection: BaseDatabaseWrapper, waiting: Mapping[int, datetime | None]
    ) -> set[str]:
        """These waiting jobs (id -> run_at, their WaitingJob rows locked) wait no more:
        each waiting live row gets its run_at back, the WaitingJob rows go. Returns the
        queues of the rows released."""
        return workflow_rows.unpark(connection, waiting)

    def mark_in_workflow(self, connection: BaseDatabaseWrapper, ids: Sequence[int]) -> None:
        """Mark these live rows in_workflow: their acks settle a workflow (models.QueueMessage)."""
        workflow_rows.mark_in_workflow(connection, ids)

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

    def crashed(
        self,
        connection: BaseDatabaseWrapper,
        claim: Claim,
        now: datetime,
        limit: int,
        retry: CrashRetry,
    ) -> tuple[bool, Row | None]:
        """Give back a valid claim whose handler took its worker (or its process-pool child)
        down: pending from `retry.run_at`, the attempt still counted, one more crash
        counted and `retry.error` (when given) its last error. At `limit` crashes, to the
        dead letters ("crashed its worker", `retry.error` or that reason as its last error)
        instead; else, `retry.out_of_attempts`, to them as "max attempts exceeded". Returns
        (whether the claim was valid, the dead row if it died)."""
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
