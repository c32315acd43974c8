"""A worker's counts and its wait and run-time histograms (timings.py), added to the
minute's QueueStat row (the charts and the metrics).

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

from ..models import DURATION_BUCKETS, QUEUE_STAT_TABLE, QueueStat
from ..timings import WAIT_FIELDS

#: The QueueStat columns a worker adds to, in the order of a Delta's values.
#: duration_*: the one run-time histogram (the chart's and /metrics/'); wait_*: the wait's.
DELTA_COLUMNS = (
    "finished", "failed", "snoozed", "retried", "duration_count", "duration_sum",
    *(column for _, column in DURATION_BUCKETS), *WAIT_FIELDS,
)  # fmt: skip
#: The columns only the leader writes (QueueStatCountService): 0 in a row a worker creates.
_LEADER_COLUMNS = ("pending", "scheduled", "claimed", "dead", "dead_lettered")

#: (queue, the values of DELTA_COLUMNS) of one flush.
Delta = tuple[str, Sequence[float]]

_ADD_DELTAS = f"""
INSERT INTO {QUEUE_STAT_TABLE}
    (queue, minute, {", ".join(_LEADER_COLUMNS)}, {", ".join(DELTA_COLUMNS)})
VALUES {{values}}
ON CONFLICT (queue, minute) DO UPDATE SET
    {", ".join(f"{c} = {QUEUE_STAT_TABLE}.{c} + excluded.{c}" for c in DELTA_COLUMNS)}
"""
_ROW = "(%s, %s, " + ", ".join(["0"] * len(_LEADER_COLUMNS) + ["%s"] * len(DELTA_COLUMNS)) + ")"


def add_by_upsert(
    connection: BaseDatabaseWrapper, minute: datetime, deltas: Sequence[Delta]
) -> None:
    """One statement for every queue of the flush; a first write of the minute inserts."""
    at = connection.ops.adapt_datetimefield_value(minute)
    values = ", ".join([_ROW] * len(deltas))
    params = [p for name, counts in deltas for p in (name, at, *counts)]
    with connection.cursor() as cursor:
        cursor.execute(_ADD_DELTAS.format(values=values), params)


def add_by_orm(connection: BaseDatabaseWrapper, minute: datetime, deltas: Sequence[Delta]) -> None:
    """Per queue: add to the minute's row, or create it; a row created meanwhile by another
    worker (IntegrityError on the unique constraint) is added to after all."""
    rows = QueueStat.objects.using(connection.alias)
    with transaction.atomic(using=connection.alias):
        for name, values in deltas:
            minute_row = rows.filter(queue=name, minute=minute)
            counts = dict(zip(DELTA_COLUMNS, values, strict=True))
            add = {column: F(column) + count for column, count in counts.items()}
            if minute_row.update(**add):
                continue
            try:
                with transaction.atomic(using=connection.alias):
                    rows.create(queue=name, minute=minute, **counts)
            except IntegrityError:
                minute_row.update(**add)
