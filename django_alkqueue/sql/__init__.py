"""The SQL that matters (claims, acks, reclaims, sweeps), written once per database vendor.

`dialect_for(connection)` picks the module that speaks to that vendor; nothing outside this
package branches on the vendor for the queue's state changes.
"""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from .base import Claim, Dialect, Row
from .postgresql import PostgresDialect
from .sqlite import SqliteDialect

__all__ = ["Claim", "Dialect", "Row", "dialect_for"]

_DIALECTS: dict[str, Dialect] = {"postgresql": PostgresDialect(), "sqlite": SqliteDialect()}


def dialect_for(connection: BaseDatabaseWrapper) -> Dialect:
    try:
        return _DIALECTS[connection.vendor]
    except KeyError:
        raise NotImplementedError(
            f"django-alkqueue supports PostgreSQL and SQLite, not {connection.vendor}"
        ) from None
