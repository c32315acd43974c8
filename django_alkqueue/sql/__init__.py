"""The SQL that matters (claims, acks, reclaims, sweeps), written once per database vendor.

`dialect_for(connection)` picks the driver that speaks to that vendor: `sqlite.py`, or the
`postgresql/` package, which holds everything that knows psycopg. Nothing outside this
package branches on the vendor; it reads the dialect's `supports_*` attributes instead.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from .base import Claim, Dialect, Notifications, Row, chunked
from .postgresql.wake_pacing import follow_up_delay
from .sqlite import SqliteDialect

__all__ = [
    "Claim", "Dialect", "Notifications", "Row", "chunked", "dialect_for", "follow_up_delay",
]  # fmt: skip

_DIALECTS: dict[str, Dialect] = {"sqlite": SqliteDialect()}


def dialect_for(connection: BaseDatabaseWrapper) -> Dialect:
    try:
        return _DIALECTS[connection.vendor]
    except KeyError:
        return _load(connection.vendor)


def _load(vendor: str) -> Dialect:
    # The PostgreSQL driver imports psycopg, which a SQLite-only project need not install.
    if vendor == "postgresql":
        from .postgresql.dialect import PostgresDialect

        dialect = _DIALECTS[vendor] = PostgresDialect()
        return dialect
    raise NotImplementedError(f"django-alkqueue supports PostgreSQL and SQLite, not {vendor}")
