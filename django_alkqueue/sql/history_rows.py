"""The history's rows (models.FinishedJob) through the ORM: the Job a history row stands
for, and the history row of a job whose live row is gone already (Dialect.keep_finished and
Dialect.select_history; each dialect's ack writes its own rows in its own statement)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Value

from ..jobs import HistoryEntry, Job, make_job
from ..models import FinishedJob


def history_job(row: FinishedJob) -> Job:
    """The Job a history row stands for: state "succeeded" or "cancelled"."""
    return make_job({
        "id": row.job_id, "queue": row.queue, "payload": row.payload, "state": row.outcome,
        "priority": row.priority, "attempts": row.attempts, "max_attempts": row.max_attempts,
        "backoff_base": row.backoff_base, "lease": row.lease,
        "run_at": row.started_at or row.enqueued_at, "enqueued_at": row.enqueued_at,
        "expires_at": None, "unique_key": row.unique_key, "claimed_by": row.worker_id,
        "lease_expires_at": None, "last_error": row.last_error, "died_at": None,
        "claimed_at": row.started_at, "reason": None, "retention": None,
        "concurrency_key": row.concurrency_key, "finished_at": row.finished_at,
        "duration": row.duration, "output": row.output, "output_error": row.output_error,
    })  # fmt: skip


def row_of(job: Job, outcome: str, now: datetime, done: HistoryEntry) -> FinishedJob:
    """The history row of a job that finished now with `outcome`, from its Job value (the live
    row is gone already: a job cancelled while running)."""
    return FinishedJob(
        job_id=job.id, queue=job.queue, payload=job.payload, priority=job.priority,
        attempts=job.attempts, max_attempts=job.max_attempts, backoff_base=job.backoff_base,
        lease=job.lease, unique_key=job.unique_key, concurrency_key=job.concurrency_key,
        last_error=job.last_error, enqueued_at=job.enqueued_at, started_at=job.claimed_at,
        finished_at=now, duration=done.duration, worker_id=job.claimed_by, outcome=outcome,
        output=_stored(done.output), output_error=done.output_error,
        delete_after=now + timedelta(seconds=done.keep),
    )  # fmt: skip


def _stored(text: str | None) -> Any:
    """Recorded output for the ORM: text already encoded goes in as is (PayloadField)."""
    return Value(text)  # Value(None) writes SQL NULL
