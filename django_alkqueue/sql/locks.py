"""Session-level named locks, which the server frees when the session ends: the leader's.

PostgreSQL has advisory locks keyed by a 64-bit integer, MySQL and MariaDB named locks
(GET_LOCK). Both stack: a session that takes a lock it holds must release it twice, so the
leader releases the extra one at once (worker/leader.py). SQLite and other databases have
none; their leader is marked on its Worker row instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

#: The PostgreSQL advisory lock key: the bytes "alkqueue" as a signed 64-bit integer.
LEADER_LOCK_KEY = int.from_bytes(b"alkqueue", "big", signed=True)
#: MySQL caps a lock name at 64 characters.
_MYSQL_NAME_LIMIT = 64


def _pg_key(connection: BaseDatabaseWrapper) -> Any:
    # One key per database: a PostgreSQL advisory lock is already scoped to its database.
    return LEADER_LOCK_KEY


def _mysql_name(connection: BaseDatabaseWrapper) -> Any:
    # GET_LOCK names are server-wide, so two projects (or two test runs) on one server would
    # share one leader without the database's name in it.
    return f"alkqueue.leader.{connection.settings_dict['NAME']}"[:_MYSQL_NAME_LIMIT]


@dataclasses.dataclass(frozen=True)
class SessionLock:
    """How one vendor takes and releases the leader's lock without waiting."""

    try_sql: str
    release_sql: str
    key: Callable[[BaseDatabaseWrapper], Any]

    def try_lock(self, connection: BaseDatabaseWrapper) -> bool:
        """Take the lock if free (or held by this session); never waits."""
        with connection.cursor() as cursor:
            cursor.execute(self.try_sql, [self.key(connection)])
            return bool(cursor.fetchone()[0])

    def release(self, connection: BaseDatabaseWrapper) -> None:
        with connection.cursor() as cursor:
            cursor.execute(self.release_sql, [self.key(connection)])


POSTGRES_LOCK = SessionLock(
    "SELECT pg_try_advisory_lock(%s)", "SELECT pg_advisory_unlock(%s)", _pg_key
)
# A timeout of 0: GET_LOCK returns 0 at once when another session holds the name.
MYSQL_LOCK = SessionLock("SELECT GET_LOCK(%s, 0)", "SELECT RELEASE_LOCK(%s)", _mysql_name)

#: The session lock of each vendor that has one (connection.vendor).
SESSION_LOCKS = {"postgresql": POSTGRES_LOCK, "mysql": MYSQL_LOCK}
