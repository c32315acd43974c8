"""Jobs that wait for others: `enqueue(..., after=[...])`.

A waiting job is a live row with no run_at (NULL: `run_at <= now` is never true of it), so
the claim statements and their index (alkqueue_pending_idx) need no new condition; its own
run_at waits in WaitingJob. Each dependency is an edge (Dependency), met when that job is
acked; the ack's own transaction meets the edges, and where it meets a job's last edge puts
its run_at back: the release. The job rows themselves are written by the dialect only
(Dialect.park, unpark, mark_in_workflow and dead_letter).

Locks, always in this order, so that two transactions never wait on each other in a circle:
the dependencies' live rows (an enqueue with after=, an ack's DELETE), then the dependents'
WaitingJob rows, then their edges. Whoever meets an edge holds its dependent's WaitingJob row
while it counts the edges left unmet, so of two acks meeting a job's last two edges at once,
the second to take the row sees the first's edge met and releases it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import connections, transaction

from .. import signals
from ..exceptions import InvalidOption
from ..jobs import Job
from ..models import DeadLetter, Dependency, FinishedJob, QueueMessage, WaitingJob
from ..sql import Row, chunked, dialect_for
from ..validation import job_id as checked_job_id

__all__ = ["DEPENDENCY_FAILED"]

#: The dead letter reason of a job whose dependency died or was cancelled.
DEPENDENCY_FAILED = "dependency failed"
#: Edges per statement: well under every database's limit on bound parameters.
_CHUNK = 500


def dependency_ids(after: object) -> list[int]:
    """The job ids `after=` names (Jobs, JobHandles or ids), checked, without repeats; no query."""
    if after is None:
        return []
    if isinstance(after, str | bytes | Job) or not isinstance(after, Iterable):
        raise InvalidOption(f"after must be a list of jobs or job ids, not {type(after).__name__}")
    ids: list[int] = []
    for item in after:
        job = getattr(item, "job", item)  # a JobHandle names its job
        ids.append(checked_job_id(job.id if isinstance(job, Job) else job))
    return list(dict.fromkeys(ids))


def live_dependencies(using: str, ids: Sequence[int]) -> list[int]:
    """Of the ids, those still live, their rows locked until commit so that none is acked
    before the edges to it are written, and marked in_workflow, so that the ack that waited
    for the lock returns the mark and settles the edges; InvalidOption for a dead, cancelled
    or unknown one. The others succeeded: gone from the live table, or kept by the history as
    succeeded."""
    if not ids:
        return []
    connection = connections[using]
    no_key = connection.features.has_select_for_no_key_update
    live: set[int] = set()
    for chunk in chunked(sorted(ids), _CHUNK):
        rows = QueueMessage.objects.using(using).filter(pk__in=chunk).order_by("pk")
        locked = list(rows.select_for_update(no_key=no_key).values_list("pk", flat=True))
        mark_in_workflow(using, locked)
        live.update(locked)
    gone = [i for i in ids if i not in live]
    if not gone:
        return sorted(live)
    dead = sorted(DeadLetter.objects.using(using).filter(job_id__in=gone).values_list(
        "job_id", flat=True))  # fmt: skip
    if dead:
        raise InvalidOption(f"job {dead[0]} is a dead letter: it cannot be waited for")
    kept = dict(FinishedJob.objects.using(using).filter(job_id__in=gone).values_list(
        "job_id", "outcome"))  # fmt: skip
    cancelled = sorted(i for i, outcome in kept.items() if outcome != "succeeded")
    if cancelled:
        raise InvalidOption(f"job {cancelled[0]} was {kept[cancelled[0]]}: it cannot be waited for")
    highest = dialect_for(connection).highest_job_id(connection)
    unknown = sorted(i for i in gone if i not in kept and i > highest)
    if unknown:
        raise InvalidOption(f"no job has id {unknown[0]}")
    return sorted(live)


def mark_in_workflow(using: str, ids: Sequence[int]) -> None:
    """Mark these live rows in_workflow: their acks settle a workflow (models.QueueMessage)."""
    connection = connections[using]
    dialect_for(connection).mark_in_workflow(connection, ids)


def wait_for(
    using: str, jobs: Sequence[Job], dependencies: Sequence[int], due: datetime | None
) -> None:
    """Inside the enqueue's transaction: the new jobs (written waiting, with no run_at) wait
    for each of `dependencies`, then run from `due`."""
    edges = [Dependency(job_id=job.id, depends_on=d) for job in jobs for d in dependencies]
    Dependency.objects.using(using).bulk_create(edges, batch_size=_CHUNK)
    waiting = [WaitingJob(job_id=job.id, run_at=due) for job in jobs]
    WaitingJob.objects.using(using).bulk_create(waiting, batch_size=_CHUNK)


def dependents_of(using: str, ids: Sequence[int]) -> dict[int, int]:
    """The jobs with an unmet edge to one of `ids`: dependent -> (one of) its dependencies."""
    found: dict[int, int] = {}
    for chunk in chunked(list(ids), _CHUNK):
        edges = Dependency.objects.using(using).filter(depends_on__in=chunk, met=False)
        found.update(edges.values_list("job_id", "depends_on"))
    return found


def _lock_waiting(using: str, job_ids: Iterable[int]) -> dict[int, datetime | None]:
    """Lock the WaitingJob rows of these jobs, in id order; returns each one's run_at."""
    locked: dict[int, datetime | None] = {}
    for chunk in chunked(sorted(set(job_ids)), _CHUNK):
        rows = WaitingJob.objects.using(using).filter(job_id__in=chunk).order_by("job_id")
        locked.update(rows.select_for_update().values_list("job_id", "run_at"))
    return locked


def succeeded(using: str, ids: Sequence[int]) -> list[int]:
    """Inside the ack's transaction: the edges to these jobs are met; every dependent left
    with none unmet is released. Returns the ids released."""
    dependents = dependents_of(using, ids)
    if not dependents:
        return []
    waiting = _lock_waiting(using, dependents)
    for chunk in chunked(list(ids), _CHUNK):
        Dependency.objects.using(using).filter(depends_on__in=chunk, met=False).update(met=True)
    return _release(using, waiting)


def _release(using: str, waiting: dict[int, datetime | None]) -> list[int]:
    """Of the locked waiting jobs, those with no unmet edge left get their run_at back."""
    blocked: set[int] = set()
    for chunk in chunked(sorted(waiting), _CHUNK):
        edges = Dependency.objects.using(using).filter(job_id__in=chunk, met=False)
        blocked.update(edges.values_list("job_id", flat=True))
    ready = sorted(i for i in waiting if i not in blocked)
    if not ready:
        return []
    connection = connections[using]
    dialect = dialect_for(connection)
    queues = dialect.unpark(connection, {job_id: waiting[job_id] for job_id in ready})
    for name in sorted(queues):
        dialect.notify(connection, name)  # sent at commit: the workers look at once
    return ready


def failed(using: str, causes: dict[int, str], now: datetime) -> list[Job]:
    """Inside the death's transaction: every job waiting on one of `causes` (id -> what
    became of it), and transitively on those, becomes a dead letter "dependency failed",
    its error naming the dependency. Returns the jobs that died so."""
    died: list[Job] = []
    while causes:
        dependents = dependents_of(using, list(causes))
        waiting = _lock_waiting(using, dependents)
        if not waiting:
            break
        jobs = _dead_letter_and_announce(using, waiting, dependents, causes, now)
        died.extend(jobs)
        causes = {job.id: f"died ({DEPENDENCY_FAILED})" for job in jobs}
    return died


def _dead_letter_and_announce(
    using: str,
    waiting: dict[int, datetime | None],
    dependents: dict[int, int],
    causes: dict[int, str],
    now: datetime,
) -> list[Job]:
    """_dead_letter, then the dead letters as Jobs, each announced (job_dead_lettered) once
    the transaction commits: a rolled-back death is never announced."""
    dialect = dialect_for(connections[using])
    rows = _dead_letter(using, waiting, dependents, causes, now)
    jobs = [dialect.to_job(row, now) for row in rows]
    if jobs:
        transaction.on_commit(lambda: _announce(jobs), using=using)
    return jobs


def _announce(jobs: Sequence[Job]) -> None:
    for job in jobs:
        signals.announce(signals.job_dead_lettered, Job, job=job)


def _dead_letter(
    using: str,
    waiting: dict[int, datetime | None],
    dependents: dict[int, int],
    causes: dict[int, str],
    now: datetime,
) -> list[Row]:
    """The locked waiting jobs -> dead letters "dependency failed", released first so that
    each dead letter keeps its own run_at; one Dialect.dead_letter per error text (one per
    failed dependency). Returns the dead rows in id order."""
    connection = connections[using]
    dialect = dialect_for(connection)
    dialect.unpark(connection, waiting)
    by_error: dict[str, list[int]] = {}
    for job_id in sorted(waiting):
        dependency = dependents[job_id]
        by_error.setdefault(f"dependency {dependency} {causes[dependency]}", []).append(job_id)
    rows: list[Row] = []
    for error, ids in by_error.items():
        rows.extend(dialect.dead_letter(connection, ids, now, DEPENDENCY_FAILED, error))
    return sorted(rows, key=lambda row: int(row[0]))


def unmet_dependencies(using: str, job_id: int) -> list[int]:
    edges = Dependency.objects.using(using).filter(job_id=job_id, met=False)
    return sorted(edges.values_list("depends_on", flat=True))


def park(using: str, job_id: int, run_at: datetime) -> None:
    """A requeued job with unmet edges waits again, from `run_at` once released."""
    connection = connections[using]
    dialect_for(connection).park(connection, job_id, run_at)


def dead_among(using: str, ids: Sequence[int]) -> list[int]:
    """Those of the ids that are dead letters now."""
    dead = DeadLetter.objects.using(using).filter(job_id__in=list(ids))
    return sorted(dead.values_list("job_id", flat=True))


def failed_now(using: str, job_id: int, dead: Sequence[int], now: datetime) -> list[Job]:
    """A requeued job whose dependency is still dead dies again at once, as it would have
    had it been waiting when that dependency died; its own dependents with it."""
    waiting = _lock_waiting(using, [job_id])
    if not waiting:
        return []
    jobs = _dead_letter_and_announce(using, waiting, {job_id: dead[0]}, {dead[0]: "is dead"}, now)
    return jobs + failed(using, {job.id: f"died ({DEPENDENCY_FAILED})" for job in jobs}, now)


def died_for(using: str, job_id: int) -> list[int]:
    """The dead letters that died because this job did ("dependency failed")."""
    dependents = list(dependents_of(using, [job_id]))
    dead = DeadLetter.objects.using(using).filter(job_id__in=dependents, reason=DEPENDENCY_FAILED)
    return sorted(dead.values_list("job_id", flat=True))


def restore_run_at(using: str, job: Job) -> Job:
    """A waiting Job with the run_at it will get once released, for the caller to read
    (its WaitingJob's; None for a wait for a signal with no deadline)."""
    if job.state != "waiting":
        return job
    kept = WaitingJob.objects.using(using).filter(job_id=job.id).values_list("run_at", flat=True)
    run_at = kept.first()
    if run_at is None:
        return job
    return dataclasses.replace(job, run_at=run_at)
