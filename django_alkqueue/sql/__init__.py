"""The SQL that matters (claims, acks, reclaims, sweeps), written once per database vendor.

`dialect_for(connection)` picks the driver that speaks to that database: `sqlite.py`, the
`postgresql/` package (which holds everything that knows psycopg), or, for any other database
whose backend has SELECT ... FOR UPDATE SKIP LOCKED (MariaDB, MySQL), the ORM dialect
(`orm.py`), which ALKQUEUE["DIALECT"] = "orm" also forces on PostgreSQL and SQLite. Nothing
outside this package branches on the vendor; it reads the dialect's `supports_*` attributes.
"""

from __future__ import annotations

import functools

from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import get_settings
from ..exceptions import UnsupportedDatabase
from .base import Claim, Claimed, CrashRetry, Dialect, Notifications, Row, chunked, ping
from .locks import SESSION_LOCKS
from .orm import OrmDialect
from .postgresql.wake_pacing import follow_up_delay
from .sqlite import SqliteDialect

__all__ = [
    "Claim", "Claimed", "CrashRetry", "Dialect", "Notifications", "Row", "chunked", "dialect_for",
    "dialect_name", "follow_up_delay", "ping",
]  # fmt: skip


def dialect_for(connection: BaseDatabaseWrapper) -> Dialect:
    """The dialect serving `connection` under ALKQUEUE["DIALECT"]; UnsupportedDatabase for
    a database with neither a dialect of its own nor SKIP LOCKED."""
    return _dialect(dialect_name(connection), connection.vendor)


def dialect_name(connection: BaseDatabaseWrapper) -> str:
    """ "postgresql", "sqlite" or "orm": which dialect serves `connection`."""
    vendor = connection.vendor
    if get_settings().DIALECT == "auto" and vendor in ("postgresql", "sqlite"):
        return vendor
    if vendor == "sqlite" or connection.features.has_select_for_update_skip_locked:
        return "orm"  # SQLite needs no row locks: its claim takes the database's write lock
    raise UnsupportedDatabase(
        f"django-alkqueue needs SELECT ... FOR UPDATE SKIP LOCKED, which this {vendor} "
        "database does not have (MariaDB needs 10.6+, MySQL 8.0.1+); see docs/databases.md"
    )


@functools.cache
def _dialect(name: str, vendor: str) -> Dialect:
    if name == "postgresql":
        # Imported here: the PostgreSQL driver's modules import psycopg, which a project on
        # another database need not install.
        from .postgresql.dialect import PostgresDialect

        return PostgresDialect()
    if name == "sqlite":
        return SqliteDialect()
    mysql = vendor == "mysql"  # MariaDB too
    return OrmDialect(
        SESSION_LOCKS.get(vendor), innodb_metrics=mysql, on_duplicate_key=mysql,
        innodb_inserts=mysql,
    )  # fmt: skip
