"""Leader election: which one worker in the cluster runs reclaim and sweep on this tick.

Where the database has advisory locks (PostgreSQL), the leader holds the session-level
advisory lock LEADER_LOCK_KEY on its own connection. If that worker dies or its connection
drops, the server releases the lock and the next worker to try takes it. Elsewhere (SQLite,
one machine): the leader is marked on its Worker row and the mark passes on when that row
goes stale.
In both cases the leader's Worker row carries is_leader=True and every other row False, set in
one UPDATE, so exactly one row is marked at any moment.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connections

from ..models import WORKER_TABLE
from ..sql import dialect_for

#: The advisory lock key: the bytes "alkqueue" as a signed 64-bit integer.
LEADER_LOCK_KEY = int.from_bytes(b"alkqueue", "big", signed=True)


class Leadership:
    def __init__(self, using: str, worker_id: str) -> None:
        self.using = using
        self.worker_id = worker_id
        self.held = False

    def acquire(self, now: datetime, stale_after: float) -> bool:
        """Try to be (or stay) the leader; returns whether this worker leads now."""
        connection = connections[self.using]
        if dialect_for(connection).supports_advisory_locks:
            self.held = self._advisory_lock(connection)
        else:
            self.held = self._row_mark(now, stale_after)
        if self.held:
            self._mark_rows()
        return self.held

    def release(self) -> None:
        connection = connections[self.using]
        if self.held and dialect_for(connection).supports_advisory_locks:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LEADER_LOCK_KEY])
        self.held = False

    def _advisory_lock(self, connection: object) -> bool:
        # Re-locking a lock this session holds succeeds again and stacks; unlock to keep
        # the count at one, so a single pg_advisory_unlock or a disconnect releases it.
        with connections[self.using].cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [LEADER_LOCK_KEY])
            got = bool(cursor.fetchone()[0])
            if got and self.held:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LEADER_LOCK_KEY])
        return got

    def _row_mark(self, now: datetime, stale_after: float) -> bool:
        cutoff = now - timedelta(seconds=stale_after)
        ops = connections[self.using].ops
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"SELECT worker_id FROM {WORKER_TABLE} "
                "WHERE is_leader AND last_heartbeat_at >= %s AND worker_id <> %s",
                [ops.adapt_datetimefield_value(cutoff), self.worker_id],
            )
            return cursor.fetchone() is None

    def _mark_rows(self) -> None:
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"UPDATE {WORKER_TABLE} SET is_leader = (worker_id = %s) "
                "WHERE is_leader <> (worker_id = %s)",
                [self.worker_id, self.worker_id],
            )
