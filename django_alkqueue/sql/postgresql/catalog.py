"""The catalog reads of the admin's health checks (reports/database_health.py judges them):
the queue tables' dead tuples and vacuums, the sessions that hold back vacuum, the
replication slots. Each returns its rows as dicts of column name to value."""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper

from ...models import DEAD_LETTER_TABLE, MESSAGE_TABLE

#: The live table and the dead letters, from the statistics collector.
QUEUE_TABLES = f"""
SELECT relname AS name, n_live_tup AS live, n_dead_tup AS dead,
       GREATEST(last_autovacuum, last_vacuum) AS vacuumed, autovacuum_count AS autovacuums
FROM pg_stat_user_tables
WHERE relname IN ('{MESSAGE_TABLE}', '{DEAD_LETTER_TABLE}') AND schemaname = current_schema()
ORDER BY relname
"""

#: The other sessions of this database with a transaction or a snapshot open, oldest first.
SESSIONS = """
SELECT pid, usename AS "user", application_name AS application, backend_type, state,
       EXTRACT(EPOCH FROM now() - xact_start)::float AS xact_age,
       age(backend_xmin) AS xmin_age, left(query, 120) AS query
FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND datname = current_database()
  AND (xact_start IS NOT NULL OR backend_xmin IS NOT NULL)
ORDER BY xact_start NULLS LAST
LIMIT 20
"""

#: Every replication slot, with how far back its xmin and catalog xmin reach.
SLOTS = """
SELECT slot_name AS name, slot_type AS type, active, age(xmin) AS xmin_age,
       age(catalog_xmin) AS catalog_xmin_age
FROM pg_replication_slots
ORDER BY slot_name
"""


def rows_of(connection: BaseDatabaseWrapper, sql: str) -> list[dict[str, Any]]:
    """The rows of a catalog read, each a dict of column name to value."""
    with connection.cursor() as cursor:
        cursor.execute(sql)
        names = [column.name for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
