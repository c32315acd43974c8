"""Debounced jobs (docs/queues.md, "Debounce"): the update in place of a debounce key's
unclaimed job, and the insert of a new one.

One unclaimed job per (queue, debounce key): the partial unique index
alkqueue_open_debounce_key (queue, debounce_key) WHERE debounce_key IS NOT NULL, and on MySQL
and MariaDB the full index alkqueue_debounce_key_full; every claim statement sets the key to
NULL, so a claimed job is in neither.
"""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Case, F, TextField, Value, When

from ..jobs import Stamps
from ..models import MESSAGE_TABLE, QueueMessage
from .base import INSERT_FIELDS, LIVE_ROW, Dialect, Row, insert_values
from .orm_rows import live_rows

#: The columns of a debounced job's INSERT.
FIELDS = (*INSERT_FIELDS, "debounce_key", "debounce_deadline")
#: What the INSERT adds when an unclaimed job holds the key: nothing (no row back).
ON_CONFLICT = "\n    ON CONFLICT (queue, debounce_key) WHERE debounce_key IS NOT NULL DO NOTHING"

# The key's unclaimed job, by index alkqueue_open_debounce_key: the new payload, run_at moved
# to the new one, never past the job's deadline, and the new expiry (so that a job expired but
# not yet swept comes back with the payload rather than taking it to the dead letters).
# PostgreSQL and SQLite alike.
UPDATE_IN_PLACE = f"""
UPDATE {MESSAGE_TABLE}
SET payload = %s,
    run_at = CASE WHEN debounce_deadline < %s THEN debounce_deadline ELSE %s END,
    expires_at = %s
WHERE queue = %s AND debounce_key = %s AND claim_token IS NULL
RETURNING {LIVE_ROW}
"""


def values(
    queue: str, text: str, stamps: Stamps, key: str, deadline: datetime | None
) -> list[object]:
    """One row in FIELDS order."""
    return [*insert_values(queue, text, stamps), key, deadline]


class UpdateInPlace(Dialect):
    """update_debounced as UPDATE_IN_PLACE, one statement, written once for the dialects
    whose UPDATE returns its rows (PostgreSQL, SQLite); the ORM dialect's is
    update_in_place_by_orm. A class of this module, not of sql/base.py, which this module
    imports."""

    def update_debounced(
        self,
        connection: BaseDatabaseWrapper,
        queue: str,
        key: str,
        text: str,
        run_at: datetime,
        expires_at: datetime | None,
    ) -> Row | None:
        at = self.param_datetime(connection, run_at)
        expiry = self.param_datetime(connection, expires_at)
        with connection.cursor() as cursor:
            cursor.execute(UPDATE_IN_PLACE, [text, at, at, expiry, queue, key])
            row = cursor.fetchone()
        return None if row is None else tuple(row)


def update_in_place_by_orm(
    connection: BaseDatabaseWrapper,
    queue: str,
    key: str,
    text: str,
    run_at: datetime,
    expires_at: datetime | None,
) -> Row | None:
    """UpdateInPlace's update through the ORM: the row locked first (a claim skips it, or
    has cleared its key by the time the lock is ours), then updated by id."""
    live = QueueMessage.objects.using(connection.alias)
    with transaction.atomic(using=connection.alias):
        if not connection.features.has_select_for_update:  # SQLite: the write lock first
            live.filter(id=0).update(attempts=F("attempts"))
        open_job = live.select_for_update().filter(
            queue=queue, debounce_key=key, claim_token__isnull=True
        )
        ids = list(open_job.values_list("id", flat=True))
        if not ids:
            return None
        live.filter(id=ids[0]).update(
            payload=Value(text, output_field=TextField()),
            run_at=Case(
                When(debounce_deadline__lt=run_at, then=F("debounce_deadline")),
                default=Value(run_at),
            ),
            expires_at=expires_at,
        )
        return live_rows(live.filter(id=ids[0]))[0]


def insert_by_orm(
    connection: BaseDatabaseWrapper,
    row: QueueMessage,
) -> int | None:
    """Save a new debounced job's row in a savepoint; None when the key's index refused it."""
    try:
        with transaction.atomic(using=connection.alias):
            row.save(using=connection.alias, force_insert=True)
    except IntegrityError:
        return None  # alkqueue_open_debounce_key (alkqueue_debounce_key_full) refused the key
    return int(row.pk)
