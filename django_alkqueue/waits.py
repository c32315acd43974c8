"""Jobs that wait for a signal (docs/durable-steps.md): `job.wait_for(name, timeout)` and
`Queue.signal(job_id, name, payload)`.

A signal is a row of JobSignal, one per job and name (the first sent stays), deleted with the
job as its steps are. A job waiting for one is a waiting job as those of workflows/dependencies
are: its live row without run_at (NULL: never due, so never claimed: no slot, no rate
token), a WaitingJob row naming the signal, with the wait's deadline as its run_at (NULL when
it has none). What puts it back:

- the signal: `send` makes it pending now, in the sender's transaction, and wakes the workers
  of its queue (NOTIFY, or this host's local wake-ups), as an enqueue does;
- the deadline: the leader's `release_lapsed` makes it pending and records the wait's
  outcome, timed out, under its name, so that the same wait_for raises WaitTimedOut;
- neither, when the signal came between the handler's look and the wait: `wait` finds it and
  puts the job back pending at once.

Locks, always in this order: the job's live row, then its signals, then its WaitingJob row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Exists, OuterRef

from .jobs import Job
from .models import JobSignal, JobStep, QueueMessage, WaitingJob
from .payload import encode
from .sql import Claim, dialect_for
from .steps import TIMED_OUT

#: The reason of a job waiting for a signal (Job.reason, as get_job reads it).
WAITING_FOR_SIGNAL = "waiting for signal {name!r}"
#: Lapsed waits one pass of the leader releases: the next passes catch up.
RELEASE_LIMIT = 500


def sent_signal(using: str, job_id: int, name: str) -> str | None:
    """The payload (JSON text) of the signal `name` sent to the job, or None. By the unique
    index alkqueue_jobsignal_name."""
    rows = JobSignal.objects.using(using).filter(job_id=job_id, name=name)
    found = rows.values_list("payload", flat=True)[:1]
    return encode(found[0], max_bytes=2**31) if found else None


def send(
    using: str, job_id: int, name: str, payload: Any, now: datetime, queue: str | None = None
) -> bool:
    """Queue.signal: record the signal `name` for a live job (of `queue`, when given) unless
    it has one of that name; a job waiting for it becomes pending now. Inside the caller's
    transaction when there is one. Returns whether the signal was recorded."""
    live = QueueMessage.objects.using(using).filter(pk=job_id)
    if queue is not None:
        live = live.filter(queue=queue)
    with transaction.atomic(using=using):
        found = list(live.select_for_update().values_list("queue", flat=True))
        if not found:
            return False
        signals = JobSignal.objects.using(using).filter(job_id=job_id, name=name)
        if signals.select_for_update().exists():
            return False
        try:
            with transaction.atomic(using=using):
                JobSignal.objects.using(using).create(
                    job_id=job_id, name=name, payload=payload, sent_at=now
                )
        except IntegrityError:  # sent by another transaction meanwhile: the first stays
            return False
        waiting = WaitingJob.objects.using(using).filter(job_id=job_id, signal=name)
        if waiting.select_for_update().exists():
            _resume(using, [job_id], now)
    return True


def wait(using: str, claim: Claim, now: datetime, name: str, deadline: datetime | None) -> bool:
    """The handler of a validly claimed job waits for the signal `name` (until `deadline`):
    it goes back unclaimed, its attempt refunded, waiting; or pending at once when the signal
    came meanwhile. False, nothing changed, when the claim is lost."""
    connection = connections[using]
    dialect = dialect_for(connection)
    with transaction.atomic(using=using):
        # Pending now, the row locked until commit: nobody claims it before it waits, or
        # it stays pending when the signal is there.
        if not dialect.snooze(connection, claim, now, now):
            return False
        signals = JobSignal.objects.using(using).filter(job_id=claim.id, name=name)
        if signals.select_for_update().exists():
            dialect.unpark(connection, {claim.id: now})
            return True
        dialect.park(connection, claim.id, deadline, signal=name)
    return True


def release_lapsed(using: str, now: datetime) -> int:
    """The leader's pass: each job whose wait for a signal reached its deadline becomes
    pending, the wait's outcome recorded as timed out under its name; the WaitingJob rows
    of jobs gone (cancelled, purged, expired) are deleted. Returns how many resumed.
    By the index alkqueue_wait_deadline_idx (signal, run_at)."""
    lapsed = WaitingJob.objects.using(using).filter(signal__isnull=False, run_at__lte=now)
    ids = sorted(lapsed.values_list("job_id", flat=True)[:RELEASE_LIMIT])
    if not ids:
        return 0
    with transaction.atomic(using=using):
        # Only jobs still without run_at wait: a requeued dead letter that died waiting
        # leaves a stale row, which goes without a record.
        live = QueueMessage.objects.using(using).filter(
            pk__in=ids, claim_token__isnull=True, run_at__isnull=True
        )
        rows = dict(live.order_by("pk").select_for_update().values_list("pk", "attempts"))
        waits = WaitingJob.objects.using(using).filter(
            job_id__in=ids, signal__isnull=False, run_at__lte=now
        )
        held = list(waits.order_by("job_id").select_for_update().values_list(
            "job_id", "signal", "run_at"))  # fmt: skip
        steps = [
            JobStep(job_id=job_id, name=signal, value={TIMED_OUT: deadline.isoformat()},
                    recorded_at=now, attempt=rows[job_id], duration=0.0)
            for job_id, signal, deadline in held
            if job_id in rows and signal is not None and deadline is not None
        ]  # fmt: skip
        JobStep.objects.using(using).bulk_create(steps, ignore_conflicts=True)
        WaitingJob.objects.using(using).filter(job_id__in=[h[0] for h in held]).delete()
        resumed = [step.job_id for step in steps]
        _resume(using, resumed, now)
    return len(resumed)


def sweep_gone(using: str, batch: int) -> int:
    """Delete up to `batch` waits for a signal whose job is gone (cancelled, purged, expired);
    returns how many. (Those with a deadline also go with the release of lapsed waits.)"""
    gone = (
        WaitingJob.objects.using(using)
        .filter(signal__isnull=False)
        .exclude(Exists(QueueMessage.objects.using(using).filter(pk=OuterRef("job_id"))))
    )
    ids = list(gone.values_list("job_id", flat=True)[:batch])
    if not ids:
        return 0
    return int(WaitingJob.objects.using(using).filter(job_id__in=ids).delete()[0])


def _resume(using: str, job_ids: Sequence[int], now: datetime) -> None:
    """Inside the caller's transaction: these waiting jobs become pending now, and the
    workers of their queues are woken once it commits."""
    connection = connections[using]
    dialect = dialect_for(connection)
    for name in sorted(dialect.unpark(connection, dict.fromkeys(job_ids, now))):
        dialect.notify(connection, name)


def with_reason(using: str, job: Job) -> Job:
    """A waiting Job, its reason naming the signal it waits for ("waiting for signal
    'approved'") when it waits for one; its run_at is the wait's deadline (None: none)."""
    rows = WaitingJob.objects.using(using).filter(job_id=job.id, signal__isnull=False)
    signal = rows.values_list("signal", flat=True).first()
    if signal is None:
        return job
    return dataclasses.replace(job, reason=WAITING_FOR_SIGNAL.format(name=signal))
