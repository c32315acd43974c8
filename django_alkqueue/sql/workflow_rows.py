"""The workflows' reads and writes that differ by database (workflows/ calls them through
the dialect: `Dialect.highest_job_id`, `Dialect.finish_batch_members`)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.backends.base.base import BaseDatabaseWrapper

from ..models import BATCH_MEMBER_TABLE, BatchMember, QueueMessage

# One statement per chunk where UPDATE returns rows (the primary key of alkqueue_batchmember).
_FINISH_MEMBERS = f"""
UPDATE {BATCH_MEMBER_TABLE} SET outcome = %s
WHERE job_id IN ({{marks}}) AND outcome IS NULL
RETURNING batch_id
"""


def highest_job_id(connection: BaseDatabaseWrapper) -> int:
    """The highest job id handed out so far, from the id sequence: an id above it names no
    job; one below it that is nowhere was acked and forgotten."""
    table = QueueMessage._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_sequence_last_value(pg_get_serial_sequence(%s, 'id')::regclass)",
                [table],
            )
        elif connection.vendor == "sqlite":
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        else:
            cursor.execute(
                "SELECT AUTO_INCREMENT - 1 FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
                [table],
            )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def finish_batch_members(
    connection: BaseDatabaseWrapper, job_ids: Sequence[int], outcome: str, returning: bool
) -> set[int]:
    """Set the outcome of these jobs' unfinished member rows; the batches they are in.
    `returning`: the database's UPDATE returns rows (Dialect.supports_update_returning)."""
    if returning:
        with connection.cursor() as cursor:
            marks = ", ".join(["%s"] * len(job_ids))
            cursor.execute(_FINISH_MEMBERS.format(marks=marks), [outcome, *job_ids])
            return {int(batch_id) for (batch_id,) in cursor.fetchall()}
    members = BatchMember.objects.using(connection.alias).filter(
        job_id__in=job_ids, outcome__isnull=True
    )
    found = set(members.values_list("batch_id", flat=True))
    if found:
        members.update(outcome=outcome)
    return found
