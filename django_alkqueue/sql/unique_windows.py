"""Unique keys taken for a window (`unique_for`, docs/queues.md "Unique windows"): one
`UniqueWindow` row per (queue, unique key), by the unique index alkqueue_unique_window_key.

The statements take their datetimes as the dialect binds them (Dialect.param_datetime).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..exceptions import AlkQueueError
from ..models import UNIQUE_WINDOW_TABLE, UniqueWindow

# Take the key: a new row, or the lapsed row of an earlier window taken over; no row back when
# a window holds it (the upsert locks that row all the same, so HOLDER reads it settled).
# Index alkqueue_unique_window_key (queue, unique_key). PostgreSQL and SQLite alike.
TAKE = f"""
INSERT INTO {UNIQUE_WINDOW_TABLE} (queue, unique_key, job_id, taken_at, lapses_at)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (queue, unique_key) DO UPDATE
SET job_id = excluded.job_id, taken_at = excluded.taken_at, lapses_at = excluded.lapses_at
WHERE {UNIQUE_WINDOW_TABLE}.lapses_at <= excluded.taken_at
RETURNING job_id
"""
# The job whose window holds the key (index alkqueue_unique_window_key).
_TRIES = 3
HOLDER = f"SELECT job_id FROM {UNIQUE_WINDOW_TABLE} WHERE queue = %s AND unique_key = %s"


# The key's window, locked until the enqueue's transaction ends, so that enqueues of one key
# in a window wait here, before they insert a job (index alkqueue_unique_window_key).
LOCK = f"""
SELECT job_id, lapses_at FROM {UNIQUE_WINDOW_TABLE}
WHERE queue = %s AND unique_key = %s
FOR UPDATE
"""


def lock(connection: BaseDatabaseWrapper, queue: str, key: str) -> tuple[int, Any] | None:
    """LOCK: the window's job id and lapse time as stored, or None when there is none."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK, [queue, key])
        row = cursor.fetchone()
    return None if row is None else (int(row[0]), row[1])


def lock_by_orm(connection: BaseDatabaseWrapper, queue: str, key: str) -> tuple[int, Any] | None:
    windows = UniqueWindow.objects.using(connection.alias).select_for_update()
    rows = list(windows.filter(queue=queue, unique_key=key).values_list("job_id", "lapses_at"))
    return None if not rows else (int(rows[0][0]), rows[0][1])


def take(
    connection: BaseDatabaseWrapper, queue: str, key: str, job_id: int, now: Any, lapses_at: Any
) -> int | None:
    """TAKE, then HOLDER when it took nothing: None when the key is now `job_id`'s, else the
    id of the job whose window holds it."""
    with connection.cursor() as cursor:
        for _ in range(_TRIES):
            cursor.execute(TAKE, [queue, key, job_id, now, lapses_at])
            if cursor.fetchone() is not None:
                return None
            cursor.execute(HOLDER, [queue, key])
            row = cursor.fetchone()
            if row is not None:
                return int(row[0])
            # Deleted between the statements (only the sweep deletes, and only lapsed ones).
    raise AlkQueueError(f"unique key {key!r} kept changing hands; enqueue again")


def take_by_orm(
    connection: BaseDatabaseWrapper,
    queue: str,
    key: str,
    job_id: int,
    now: datetime,
    lapses_at: datetime,
) -> int | None:
    """take() through the ORM (MySQL, MariaDB), inside the caller's transaction: a lapsed
    window taken over first, else a new one inserted in a savepoint (an UPDATE after a
    refused INSERT of one key deadlocks on InnoDB with the other refused inserts)."""
    windows = UniqueWindow.objects.using(connection.alias).filter(queue=queue, unique_key=key)
    for _ in range(_TRIES):
        taken = {"job_id": job_id, "taken_at": now, "lapses_at": lapses_at}
        if windows.filter(lapses_at__lte=now).update(**taken):
            return None
        holder = windows.values_list("job_id", flat=True).first()
        if holder is not None:
            return int(holder)
        try:
            with transaction.atomic(using=connection.alias):
                windows.create(queue=queue, unique_key=key, **taken)
            return None
        except IntegrityError:
            continue  # another enqueue inserted it first: read it again
    raise AlkQueueError(f"unique key {key!r} kept changing hands; enqueue again")


def sweep(connection: BaseDatabaseWrapper, now: datetime) -> int:
    """Delete the lapsed windows (index alkqueue_window_lapse_idx); returns how many."""
    lapsed = UniqueWindow.objects.using(connection.alias).filter(lapses_at__lte=now)
    return int(lapsed.delete()[0])
