"""The leader's mark on the Worker rows (worker/leader.py): which row is marked, and the one
UPDATE that marks the leader's row and unmarks every other, so exactly one row is marked at
any moment. Plain SQL on every vendor."""

from __future__ import annotations

from datetime import datetime

from django.db.backends.base.base import BaseDatabaseWrapper

from ..models import WORKER_TABLE


def another_leader(connection: BaseDatabaseWrapper, worker_id: str, since: datetime) -> bool:
    """Whether a row other than `worker_id`'s, heartbeating at `since` or later, is marked."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT worker_id FROM {WORKER_TABLE} "
            "WHERE is_leader AND last_heartbeat_at >= %s AND worker_id <> %s",
            [connection.ops.adapt_datetimefield_value(since), worker_id],
        )
        return cursor.fetchone() is not None


def mark_leader(connection: BaseDatabaseWrapper, worker_id: str) -> None:
    """Mark `worker_id`'s row and unmark every other, writing only the rows that change."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {WORKER_TABLE} SET is_leader = (worker_id = %s) "
            "WHERE is_leader <> (worker_id = %s)",
            [worker_id, worker_id],
        )
