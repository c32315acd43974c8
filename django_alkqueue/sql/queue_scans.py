"""Queue names, and each queue's first unclaimed run_at, read by walking indexes (loose index
scans): each step asks an index for the next value after the last one, so the cost grows with
the number of queues (and priorities), never with the rows of a long queue. The same SQL runs
on every vendor (Dialect.known_queues, Dialect.first_unclaimed_run_at); the tests EXPLAIN
both statements (tests/test_admin_queries.py, tests/test_health.py)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.dateparse import parse_datetime

from ..models import CONSUMER_TABLE, DEAD_LETTER_TABLE, MESSAGE_TABLE

# One recursive step per name. The scans walk both partial indexes of the live table and the
# dead letters' index.
_NEXT_NAME = """{cte}(queue) AS (
    SELECT MIN(queue) FROM {table} WHERE {where}
    UNION ALL
    SELECT (SELECT MIN(queue) FROM {table} WHERE {where} AND queue > {cte}.queue)
    FROM {cte} WHERE {cte}.queue IS NOT NULL
)"""
_QUEUE_SCANS = (
    ("unclaimed", MESSAGE_TABLE, "claim_token IS NULL"),  # PENDING_INDEX
    ("claimed", MESSAGE_TABLE, "claim_token IS NOT NULL"),  # LEASE_INDEX
    ("dead", DEAD_LETTER_TABLE, "1 = 1"),  # alkqueue_dead_queue_idx
)
#: Every queue named by a live job, a dead letter or a Consumer row.
KNOWN_QUEUES_SQL = (
    "WITH RECURSIVE "
    + ",\n".join(_NEXT_NAME.format(cte=c, table=t, where=w) for c, t, w in _QUEUE_SCANS)
    + "\n"
    + "\nUNION ".join(f"SELECT queue FROM {c} WHERE queue IS NOT NULL" for c, _, _ in _QUEUE_SCANS)
    + f"\nUNION SELECT queue FROM {CONSUMER_TABLE}"
)

# The oldest due job of a queue is the earliest run_at among its unclaimed rows. In
# alkqueue_pending_idx (queue, priority DESC, run_at, id) that is the first entry of one of
# the queue's priorities, so the statement walks the queue names, then each queue's
# priorities, then reads one entry per priority: index probes, as many as (queue, priority)
# pairs.
_OLDEST_UNCLAIMED = f"""WITH RECURSIVE names(queue) AS (
    SELECT MIN(queue) FROM {MESSAGE_TABLE} WHERE claim_token IS NULL
    UNION ALL
    SELECT (SELECT MIN(queue) FROM {MESSAGE_TABLE}
            WHERE claim_token IS NULL AND queue > names.queue)
    FROM names WHERE names.queue IS NOT NULL
), levels(queue, priority) AS (
    SELECT names.queue, (SELECT MAX(priority) FROM {MESSAGE_TABLE} m
                         WHERE m.claim_token IS NULL AND m.queue = names.queue)
    FROM names WHERE names.queue IS NOT NULL{{only}}
    UNION ALL
    SELECT levels.queue, (SELECT MAX(priority) FROM {MESSAGE_TABLE} m
                          WHERE m.claim_token IS NULL AND m.queue = levels.queue
                            AND m.priority < levels.priority)
    FROM levels WHERE levels.priority IS NOT NULL
)
SELECT queue, MIN(first_run) FROM (
    SELECT levels.queue, (SELECT MIN(run_at) FROM {MESSAGE_TABLE} m
                          WHERE m.claim_token IS NULL AND m.queue = levels.queue
                            AND m.priority = levels.priority) AS first_run
    FROM levels WHERE levels.priority IS NOT NULL
) firsts GROUP BY queue"""


def oldest_unclaimed_sql(queues: Collection[str] | None = None) -> str:
    """The statement of `first_unclaimed_run_at`, for all queues or (with `queues`) those."""
    only = ""
    if queues is not None:
        only = " AND names.queue IN (" + ", ".join(["%s"] * len(queues)) + ")"
    return _OLDEST_UNCLAIMED.format(only=only)


def known_queues(connection: BaseDatabaseWrapper) -> list[str]:
    """Every queue named by a consumer, a live job or a dead letter, sorted."""
    with connection.cursor() as cursor:
        cursor.execute(KNOWN_QUEUES_SQL)
        return sorted(row[0] for row in cursor.fetchall())


def first_unclaimed_run_at(
    connection: BaseDatabaseWrapper, queues: Collection[str] | None
) -> dict[str, datetime]:
    """The earliest run_at among the unclaimed rows of each queue (of `queues`, when given)
    that has any, due or not."""
    with connection.cursor() as cursor:
        cursor.execute(oldest_unclaimed_sql(queues), list(queues or ()))
        rows = cursor.fetchall()
    firsts = {name: _read_datetime(first_run) for name, first_run in rows}
    return {name: at for name, at in firsts.items() if at is not None}


def _read_datetime(value: object) -> datetime | None:
    """A timestamp column read by raw SQL: SQLite returns text, MySQL a naive UTC datetime."""
    parsed = parse_datetime(value) if isinstance(value, str) else value
    if not isinstance(parsed, datetime):
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
