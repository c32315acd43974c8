"""The history's day partitions on PostgreSQL (migration 0003_finished_jobs makes the table).

Each day of `finished_at` (UTC) has a partition named alkqueue_finishedjob_pYYYYMMDD, made
ahead by the leader (`prepare`); rows of a day without one go to the DEFAULT partition, so
an ack never fails for a missing partition. The sweep drops a past day's partition once
every row in it is past its delete_after (a drop, not millions of deletes), and deletes the
expired rows of the others (the default one included) in batches.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime, time, timedelta

from django.db import OperationalError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ...models import HISTORY_TABLE

logger = logging.getLogger("django_alkqueue")

#: Days after today whose partitions the leader keeps ready.
DAYS_AHEAD = 3
#: How long a drop waits for the table's lock before it leaves the partition to the next
#: sweep: acks wait behind a drop that waits.
DROP_LOCK_TIMEOUT = "2s"
DEFAULT_PARTITION = f"{HISTORY_TABLE}_default"
_DAY_PARTITION = re.compile(rf"{HISTORY_TABLE}_p(\d{{8}})")

PARTITIONS = f"""
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = '{HISTORY_TABLE}'::regclass
"""
# One creator of partitions at a time: the lock ATTACH takes anyway, on the parent alone. Acks
# (their inserts) and the sweep's deletes do not wait for it.
_SERIALISE = f"LOCK TABLE ONLY {HISTORY_TABLE} IN SHARE UPDATE EXCLUSIVE MODE"
# A new day's partition: made apart, given the rows of its day that the default partition
# took meanwhile, then attached (SHARE UPDATE EXCLUSIVE on the table: acks go on).
_CREATE = "CREATE TABLE {name} (LIKE " + HISTORY_TABLE + " INCLUDING DEFAULTS)"
_MOVE = f"""
WITH moved AS (
    DELETE FROM {DEFAULT_PARTITION} WHERE finished_at >= %s AND finished_at < %s RETURNING *
)
INSERT INTO {{name}} SELECT * FROM moved
"""
_ATTACH = f"ALTER TABLE {HISTORY_TABLE} ATTACH PARTITION {{name}} FOR VALUES FROM (%s) TO (%s)"
# The latest delete_after of a partition (alkqueue_finished_expiry_idx, read backwards).
_LATEST = "SELECT max(delete_after) FROM {name}"
# Expired rows, a batch at a time (alkqueue_finished_expiry_idx).
_DELETE_EXPIRED = """
DELETE FROM {name} WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM {name} WHERE delete_after <= %s LIMIT %s
))
"""


def partition_name(day: date) -> str:
    return f"{HISTORY_TABLE}_p{day:%Y%m%d}"


def _bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(), tzinfo=UTC)
    return start, start + timedelta(days=1)


def partitions(connection: BaseDatabaseWrapper) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(PARTITIONS)
        return sorted(row[0] for row in cursor.fetchall())


def prepare(connection: BaseDatabaseWrapper, now: datetime) -> int:
    """Create the partitions of today and the DAYS_AHEAD days after it that are missing;
    returns how many were created."""
    have = set(partitions(connection))
    today = now.astimezone(UTC).date()
    created = 0
    for offset in range(DAYS_AHEAD + 1):
        day = today + timedelta(days=offset)
        name = partition_name(day)
        if name not in have and _create(connection, name, day):
            created += 1
    return created


def _create(connection: BaseDatabaseWrapper, name: str, day: date) -> bool:
    """Make the day's partition, unless another process made it since this one looked: the
    parent's lock lets one creator at a time look again and create, so that each partition
    is made, and logged, once. Returns whether this call made it."""
    start, end = _bounds(day)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(_SERIALISE)
        if name in partitions(connection):
            return False
        cursor.execute(_CREATE.format(name=name))
        cursor.execute(_MOVE.format(name=name), [start, end])
        cursor.execute(_ATTACH.format(name=name), [start, end])
    logger.info("created the history partition %s", name)
    return True


def sweep(connection: BaseDatabaseWrapper, now: datetime, batch: int) -> int:
    """Drop each past day's partition whose rows are all past delete_after; delete the
    expired rows of the other partitions, `batch` per statement. Returns the rows deleted,
    a dropped partition's as the planner counts them."""
    deleted = 0
    for name in partitions(connection):
        day = _day_of(name)
        if day is not None and _bounds(day)[1] <= now and _all_expired(connection, name, now):
            deleted += _drop(connection, name)
        else:
            deleted += _delete_expired(connection, name, now, batch)
    return deleted


def _day_of(name: str) -> date | None:
    match = _DAY_PARTITION.fullmatch(name)
    return None if match is None else datetime.strptime(match[1], "%Y%m%d").date()


def _all_expired(connection: BaseDatabaseWrapper, name: str, now: datetime) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_LATEST.format(name=name))
        latest = cursor.fetchone()[0]
    return latest is None or latest <= now


def _drop(connection: BaseDatabaseWrapper, name: str) -> int:
    try:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'")
            # The planner's count: a count(*) would read the day's rows the drop saves.
            cursor.execute("SELECT greatest(reltuples, 0)::bigint FROM pg_class "
                           "WHERE oid = %s::regclass", [name])  # fmt: skip
            rows = int(cursor.fetchone()[0])
            cursor.execute(f"DROP TABLE {name}")
    except OperationalError as exc:  # the lock was not had in time: the next sweep
        logger.warning("history partition %s not dropped this time: %s", name, exc)
        return 0
    logger.info("dropped the history partition %s (%d rows)", name, rows)
    return rows


def _delete_expired(connection: BaseDatabaseWrapper, name: str, now: datetime, batch: int) -> int:
    deleted = 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(_DELETE_EXPIRED.format(name=name), [now, batch])
            count = int(cursor.rowcount)
            deleted += count
            if count < batch:
                return deleted
