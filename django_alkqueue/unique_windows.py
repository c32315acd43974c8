"""Unique keys held for a window (docs/queues.md, "Unique windows"): `unique_for` keeps a key
taken after its job finished, until the window the enqueue that took it opened lapses."""

from __future__ import annotations

from datetime import datetime

from django.db import connections, transaction

from . import signals
from .exceptions import AlkQueueError
from .jobs import LIVE_STATES, NO_KEYS, Job, JobKeys, Stamps
from .operations import (
    DEADLOCK_RETRIES,
    KEY_RACE_RETRIES,
    after_deadlock,
    with_keys,
)
from .payload import decode
from .sql import dialect_for


class _WindowHeld(Exception):
    """Rolls back the job just written: a window holds its key (`job_id`'s)."""

    def __init__(self, job_id: int) -> None:
        super().__init__(job_id)
        self.job_id = job_id


def enqueue_in_window(
    using: str,
    queue: str,
    text: str,
    stamps: Stamps,
    now: datetime,
    lapses_at: datetime,
    keys: JobKeys,
) -> Job | None:
    """A new job holding stamps.unique_key until `lapses_at`; else nothing written, and the
    holder: the live job holding the key, or the job whose window holds it while it is
    live, or None once that job has finished."""
    dialect, connection = dialect_for(connections[using]), connections[using]
    races = deadlocks = 0
    while races < KEY_RACE_RETRIES and deadlocks < DEADLOCK_RETRIES:
        try:
            found = _attempt(using, queue, text, stamps, now, lapses_at, keys)
        except _WindowHeld as held:
            return _live(using, held.job_id, queue, now)
        except Exception as error:
            # InnoDB: two inserts of a key whose last row is deleted but not yet purged.
            after_deadlock(connection, dialect, error, deadlocks)
            deadlocks += 1
            continue
        if found is None:
            races += 1
            continue  # the live holder finished between the INSERT and the SELECT
        job, written = found
        if written:
            dialect.wake_after_insert(connection, queue, single=False)
            signals.announce(signals.job_enqueued, Job, job=job)
        return job
    raise AlkQueueError(f"unique key {stamps.unique_key!r} kept changing hands; enqueue again")


def _attempt(
    using: str,
    queue: str,
    text: str,
    stamps: Stamps,
    now: datetime,
    lapses_at: datetime,
    keys: JobKeys,
) -> tuple[Job, bool] | None:
    """One transaction: the key's window locked, the job, then the window taken; (the job,
    written) or None to try again. A window that holds the key raises _WindowHeld, which
    rolls back what the attempt wrote."""
    dialect, connection = dialect_for(connections[using]), connections[using]
    assert stamps.unique_key is not None
    with transaction.atomic(using=using):
        held = dialect.lock_unique_window(connection, queue, stamps.unique_key, now)
        if held is not None:
            raise _WindowHeld(held)
        job_id = dialect.insert_unique(connection, queue, text, stamps)
        if job_id is None:  # a live job holds the key (alkqueue_live_unique_key)
            holder = dialect.select_live_by_key(connection, queue, stamps.unique_key)
            return None if holder is None else (dialect.to_job(holder, now), False)
        held_by = dialect.take_unique_window(
            connection, queue, stamps.unique_key, job_id, now, lapses_at
        )
        if held_by is not None:
            raise _WindowHeld(held_by)
        job = stamps.new_job(job_id, queue, decode(text), now)
        if keys != NO_KEYS:
            (job,) = with_keys(using, [job], [keys])
    return job, True


def _live(using: str, job_id: int, queue: str, now: datetime) -> Job | None:
    """The job `job_id` as it is now while it is live; None once it has finished."""
    dialect = dialect_for(connections[using])
    row = dialect.select_job(connections[using], job_id, queue)
    if row is None:
        return None
    job = dialect.to_job(row, now)
    return job if job.state in LIVE_STATES else None
