"""The workflows' reads and writes of rows, the job rows' among them (workflows/ calls them
through the dialect: `Dialect.highest_job_id`, `Dialect.finish_batch_members`,
`Dialect.park`, `Dialect.unpark`, `Dialect.mark_in_workflow`).

A waiting job is a live row with no run_at (NULL: never due), its own run_at kept in its
WaitingJob row until it is released."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

from django.db.backends.base.base import BaseDatabaseWrapper

from ..models import BATCH_MEMBER_TABLE, BatchMember, QueueMessage, WaitingJob

#: Ids per statement: well under every database's limit on bound parameters.
_CHUNK = 500

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


def park(
    connection: BaseDatabaseWrapper,
    job_id: int,
    run_at: datetime | None,
    signal: str | None = None,
) -> None:
    """The live row waits (run_at NULL), from `run_at` once released (its WaitingJob row,
    which names the `signal` it waits for, if any; None: a wait with no deadline)."""
    QueueMessage.objects.using(connection.alias).filter(pk=job_id).update(run_at=None)
    WaitingJob.objects.using(connection.alias).update_or_create(
        job_id=job_id, defaults={"run_at": run_at, "signal": signal}
    )


def unpark(connection: BaseDatabaseWrapper, waiting: Mapping[int, datetime | None]) -> set[str]:
    """Each waiting live row of `waiting` (id -> run_at) gets its run_at back (one UPDATE
    per run_at and chunk), and the WaitingJob rows go. Returns the queues of those rows. A
    None (a wait with no deadline) leaves its row without run_at: only a death does that,
    and the dead letter takes the time it died (Dialect.dead_letter)."""
    live = QueueMessage.objects.using(connection.alias)
    by_run_at: dict[datetime, list[int]] = {}
    for job_id in sorted(waiting):
        run_at = waiting[job_id]
        if run_at is not None:
            by_run_at.setdefault(run_at, []).append(job_id)
    for run_at, job_ids in by_run_at.items():
        for chunk in _chunks(job_ids):
            live.filter(pk__in=chunk, run_at__isnull=True).update(run_at=run_at)
    queues: set[str] = set()
    for chunk in _chunks(sorted(waiting)):
        WaitingJob.objects.using(connection.alias).filter(job_id__in=chunk).delete()
        queues.update(live.filter(pk__in=chunk).values_list("queue", flat=True))
    return queues


def mark_in_workflow(connection: BaseDatabaseWrapper, ids: Sequence[int]) -> None:
    """Mark these live rows in_workflow (models.QueueMessage): their acks settle a workflow."""
    live = QueueMessage.objects.using(connection.alias)
    for chunk in _chunks(list(ids)):
        live.filter(pk__in=chunk, in_workflow=False).update(in_workflow=True)


def _chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]
