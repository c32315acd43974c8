"""A worker's finished, failed and snoozed counts, added to the minute's QueueStat row (the charts).

Two ways of writing the same thing: one upsert statement where the database has
INSERT ... ON CONFLICT (PostgreSQL, SQLite >= 3.24), and the ORM's update-then-insert for the
ORM dialect. Either way the unique constraint alkqueue_stat_minute on (queue, minute) keeps
one row per queue and minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F

from ..models import QUEUE_STAT_TABLE, QueueStat

#: (queue, finished, failed, snoozed) of one flush.
Delta = tuple[str, int, int, int]

_ADD_DELTAS = f"""
INSERT INTO {QUEUE_STAT_TABLE}
    (queue, minute, pending, scheduled, claimed, dead, finished, failed, dead_lettered, snoozed)
VALUES {{values}}
ON CONFLICT (queue, minute) DO UPDATE SET
    finished = {QUEUE_STAT_TABLE}.finished + excluded.finished,
    failed = {QUEUE_STAT_TABLE}.failed + excluded.failed,
    snoozed = {QUEUE_STAT_TABLE}.snoozed + excluded.snoozed
"""


def add_by_upsert(
    connection: BaseDatabaseWrapper, minute: datetime, deltas: Sequence[Delta]
) -> None:
    """One statement for every queue of the flush; a first write of the minute inserts."""
    at = connection.ops.adapt_datetimefield_value(minute)
    values = ", ".join(["(%s, %s, 0, 0, 0, 0, %s, %s, 0, %s)"] * len(deltas))
    params = [p for name, *counts in deltas for p in (name, at, *counts)]
    with connection.cursor() as cursor:
        cursor.execute(_ADD_DELTAS.format(values=values), params)


def add_by_orm(connection: BaseDatabaseWrapper, minute: datetime, deltas: Sequence[Delta]) -> None:
    """Per queue: add to the minute's row, or create it; a row created meanwhile by another
    worker (IntegrityError on the unique constraint) is added to after all."""
    rows = QueueStat.objects.using(connection.alias)
    with transaction.atomic(using=connection.alias):
        for name, finished, failed, snoozed in deltas:
            minute_row = rows.filter(queue=name, minute=minute)
            counts = {"finished": finished, "failed": failed, "snoozed": snoozed}
            add = {column: F(column) + count for column, count in counts.items()}
            if minute_row.update(**add):
                continue
            try:
                with transaction.atomic(using=connection.alias):
                    rows.create(queue=name, minute=minute, **counts)
            except IntegrityError:
                minute_row.update(**add)
