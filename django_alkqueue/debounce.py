"""Debounced enqueues (docs/queues.md, "Debounce"): a burst of enqueues with one debounce key
leaves one job, updated in place while unclaimed, run once the burst has been quiet for
`debounce` (or `debounce_max` after its first enqueue)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.db import connections, transaction

from . import signals
from .exceptions import AlkQueueError
from .jobs import NO_KEYS, Job, JobKeys, Stamps
from .operations import (
    DEADLOCK_RETRIES,
    KEY_RACE_RETRIES,
    after_deadlock,
    with_keys,
)
from .payload import decode
from .sql import dialect_for


class Debounce(NamedTuple):
    """One debounced enqueue: its key, the run_at it asks for (now + debounce), and the
    deadline a new job gets (the burst's first enqueue + debounce_max; None: none)."""

    key: str
    run_at: datetime
    deadline: datetime | None


def enqueue_debounced(
    using: str,
    queue: str,
    text: str,
    stamps: Stamps,
    now: datetime,
    debounce: Debounce,
    keys: JobKeys,
) -> Job:
    """The key's unclaimed job updated in place (payload, run_at; job_debounced), else a new
    job holding the key (job_enqueued). Of two enqueues racing for a free key, the second's
    insert finds the first's row and updates it."""
    dialect, connection = dialect_for(connections[using]), connections[using]
    races = deadlocks = 0
    while races < KEY_RACE_RETRIES and deadlocks < DEADLOCK_RETRIES:
        try:
            found = _attempt(using, queue, text, stamps, now, debounce, keys)
        except Exception as error:
            # InnoDB: two inserts of a key a claim has just cleared, not yet purged.
            after_deadlock(connection, dialect, error, deadlocks)
            deadlocks += 1
            continue
        if found is None:
            races += 1
            continue  # an unclaimed job took the key since the update: update it
        job, written = found
        if written:
            dialect.wake_after_insert(connection, queue, single=True)
            signals.announce(signals.job_enqueued, Job, job=job)
        else:
            signals.announce(signals.job_debounced, Job, job=job)
        return job
    raise AlkQueueError(f"debounce key {debounce.key!r} kept changing hands; enqueue again")


def _attempt(
    using: str,
    queue: str,
    text: str,
    stamps: Stamps,
    now: datetime,
    debounce: Debounce,
    keys: JobKeys,
) -> tuple[Job, bool] | None:
    """The update in place, else the insert: (the job, written), or None to try again."""
    dialect, connection = dialect_for(connections[using]), connections[using]
    row = dialect.update_debounced(
        connection, queue, debounce.key, text, debounce.run_at, stamps.expires_at
    )
    if row is not None:
        return dialect.to_job(row, now), False
    with transaction.atomic(using=using):
        job_id = dialect.insert_debounced(
            connection, queue, text, stamps, debounce.key, debounce.deadline
        )
        if job_id is None:
            return None
        job = stamps.new_job(job_id, queue, decode(text), now)
        if keys != NO_KEYS:
            (job,) = with_keys(using, [job], [keys])
    return job, True
