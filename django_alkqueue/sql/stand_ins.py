"""Which stand-in indexes (models.STAND_INS) a database without partial indexes lacks, read
from information_schema's COLUMNS and STATISTICS as MariaDB and MySQL document them."""

from __future__ import annotations

from django.db.backends.base.base import BaseDatabaseWrapper

from ..models import STAND_INS, StandIn

COLUMNS_SQL = (
    "SELECT column_name FROM information_schema.COLUMNS "
    "WHERE table_schema = DATABASE() AND table_name = %s"
)
INDEXES_SQL = (
    "SELECT DISTINCT index_name FROM information_schema.STATISTICS "
    "WHERE table_schema = DATABASE() AND table_name = %s"
)


def missing_stand_ins(connection: BaseDatabaseWrapper) -> dict[str, StandIn]:
    """The stand-ins the database lacks, by the name of what each stands in for, though every
    column each indexes is there: a table or column still to come means migrations still to
    run, which build the stand-in. None where partial indexes exist, and none on another
    vendor (no query here reads them)."""
    if connection.features.supports_partial_indexes or connection.vendor != "mysql":
        return {}
    tables = {table: _names(connection, table) for table in {s.table for s in STAND_INS.values()}}
    return {
        name: stand_in
        for name, stand_in in STAND_INS.items()
        if _columns(stand_in) <= tables[stand_in.table][0]
        and stand_in.name not in tables[stand_in.table][1]
    }


def _columns(stand_in: StandIn) -> set[str]:
    return {column.split()[0] for column in stand_in.columns}  # "priority DESC": priority


def _names(connection: BaseDatabaseWrapper, table: str) -> tuple[set[str], set[str]]:
    """The names of `table`'s columns and of its indexes; two empty sets for no table."""
    with connection.cursor() as cursor:
        cursor.execute(COLUMNS_SQL, [table])
        columns = {row[0] for row in cursor.fetchall()}
        cursor.execute(INDEXES_SQL, [table])
        return columns, {row[0] for row in cursor.fetchall()}
