"""Kept history: which queues keep their finished jobs, for how long, and what is recorded.

A queue keeps when its @consumer says `keep=...` or ALKQUEUE["QUEUES"][name]["keep"] does.
Each of its finished jobs (acked, or cancelled while running) is then written to the
FinishedJob table in the transaction of its ack, with the handler's return value as JSON
(at most ALKQUEUE["MAX_OUTPUT_BYTES"]); an output that cannot be recorded is replaced by a
note and never fails the job (docs/running-jobs.md, "Kept history and recorded output").
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Value

from .conf import get_settings
from .consumers import registry
from .jobs import Job, make_job
from .models import FinishedJob

#: The encoder of recorded output: strict JSON (no NaN), compact, non-ASCII kept.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Finish:
    """What a kept row holds beyond the live row it comes from: how long to keep it, how
    long the handler ran, and its recorded output (JSON text) or the note that replaced it."""

    keep: float
    duration: float | None = None
    output: str | None = None
    output_error: str | None = None


def keep_for(queue: str) -> float | None:
    """Seconds the queue keeps its finished jobs; None when it keeps none (the default)."""
    spec = registry.get(queue)
    if spec is not None and spec.keep is not None:
        return spec.keep
    keep = get_settings().QUEUES.get(queue, {}).get("keep")
    if keep is None:
        return None
    return float(keep.total_seconds() if hasattr(keep, "total_seconds") else keep)


def keeping_queues() -> set[str]:
    """The queues whose @consumer or ALKQUEUE["QUEUES"] entry sets a keep."""
    named = {spec.queue for spec in registry.all() if spec.keep is not None}
    options = get_settings().QUEUES
    return named | {name for name, option in options.items() if option.get("keep") is not None}


def recorded_output(value: Any, limit: int) -> tuple[str | None, str | None]:
    """(the value as JSON text, None), or (None, why it was not recorded). None records
    nothing; a value that is not JSON, or is longer than `limit` bytes, gives a note."""
    if value is None:
        return None, None
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"output not recorded: not JSON ({type(exc).__name__}: {exc})"[:500]
    size = len(text.encode())
    if size > limit:
        return None, (
            f"output not recorded: {size} bytes, more than ALKQUEUE['MAX_OUTPUT_BYTES'] ({limit})"
        )
    return text, None


def finish(queue: str, value: Any, duration: float | None) -> Finish | None:
    """The Finish of a job of `queue` whose handler returned `value` after `duration`
    seconds; None when the queue keeps no history (nothing is encoded then)."""
    keep = keep_for(queue)
    if keep is None:
        return None
    output, error = recorded_output(value, get_settings().MAX_OUTPUT_BYTES)
    return Finish(keep, duration, output, error)


def kept_job(row: FinishedJob) -> Job:
    """The Job a kept row stands for: state "succeeded" or "cancelled"."""
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


def row_of(job: Job, outcome: str, now: datetime, done: Finish) -> FinishedJob:
    """The kept row of a job that finished now with `outcome`, from its Job value (the live
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
