"""Leader election: which one worker in the cluster runs reclaim and sweep on this tick.

Where the database has session locks (PostgreSQL's advisory lock LEADER_LOCK_KEY, MySQL's and
MariaDB's GET_LOCK; sql/locks.py), the leader holds that lock on its own connection. If that
worker dies or its connection drops, the server releases the lock and the next worker to try
takes it. Elsewhere (SQLite, one machine): the leader is marked on its Worker row and the mark
passes on when that row goes stale.
In both cases the leader's Worker row carries is_leader=True and every other row False, set in
one UPDATE, so exactly one row is marked at any moment.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..sql import dialect_for
from ..sql.locks import LEADER_LOCK_KEY

__all__ = ["LEADER_LOCK_KEY", "Leadership"]


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
            dialect_for(connection).release_leader_lock(connection)
        self.held = False

    def _advisory_lock(self, connection: BaseDatabaseWrapper) -> bool:
        # Re-locking a lock this session holds succeeds again and stacks; unlock to keep
        # the count at one, so a single release or a disconnect frees it.
        dialect = dialect_for(connection)
        got = dialect.try_leader_lock(connection)
        if got and self.held:
            dialect.release_leader_lock(connection)
        return got

    def _row_mark(self, now: datetime, stale_after: float) -> bool:
        connection = connections[self.using]
        cutoff = now - timedelta(seconds=stale_after)
        return not dialect_for(connection).another_leader(connection, self.worker_id, cutoff)

    def _mark_rows(self) -> None:
        connection = connections[self.using]
        dialect_for(connection).mark_leader(connection, self.worker_id)
