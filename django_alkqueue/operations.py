"""Every state transition of a job, each one named function. Callers never write an UPDATE.

Inputs are explicit: the database alias, the time `now`, the claim that fences the change.
The SQL itself lives in `sql/`, once per vendor; this module adds the rules around it
(what counts as done, which signal fires) and turns rows into `Job` values.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, Min, Q
from django.utils import timezone

from . import fair_share, history, signals, validation, waits
from . import limits as flow
from .defaults import CRASHES_TO_DEAD
from .error_text import capped, capped_or_none
from .exceptions import AlkQueueError, InvalidOption
from .fair_share import FairShare
from .jobs import (
    EXPIRED,
    NO_KEYS,
    HistoryEntry,
    Job,
    JobKeys,
    Progress,
    QueueStats,
    Stamps,
    stored_progress,
)  # fmt: skip
from .limits import LimitsInForce
from .models import (
    FAIR_CLAIMS_KEPT,
    CancelRequest,
    Consumer,
    DeadLetter,
    JobStep,
    QueueMessage,
    Worker,
)
from .payload import decode
from .sql import Claim, Claimed, CrashRetry, Dialect, Row, chunked, dialect_for
from .workflows import dependencies, finishing, sweep

KEY_RACE_RETRIES = 5
#: How often a keyed enqueue outside any transaction runs again after InnoDB broke a deadlock
#: by rolling it back (debounce.py, unique_windows.py), each after a short random pause.
DEADLOCK_RETRIES = 20


def after_deadlock(
    connection: BaseDatabaseWrapper, dialect: Dialect, error: Exception, n: int
) -> None:
    """Re-raise `error` unless it is a deadlock the database rolled back outside any
    transaction of the caller's (then that work may run again); else pause a random
    moment, longer after each (`n`), so that the two sides do not meet again at once."""
    if connection.in_atomic_block or not dialect.is_deadlock(error):
        raise error
    time.sleep(random.uniform(0, 0.002 * (n + 1)))


#: Rows per write of a bulk enqueue: small enough that the work on the next chunk overlaps
#: the server's on this one, large enough that each write is one cheap round of COPY.
ENQUEUE_CHUNK = 1_000


def _dialect_and_connection(using: str) -> tuple[Dialect, BaseDatabaseWrapper]:
    connection = connections[using]
    return dialect_for(connection), connection


def _jobs(using: str, rows: Iterable[Row], now: datetime) -> list[Job]:
    dialect = dialect_for(connections[using])
    return [dialect.to_job(row, now) for row in rows]


def _announce_deaths(jobs: Iterable[Job]) -> None:
    for job in jobs:
        signals.announce(signals.job_dead_lettered, Job, job=job)


def enqueue(
    using: str,
    queue: str,
    texts: Iterable[str],
    count: int,
    stamps: Stamps,
    now: datetime,
    keys: Sequence[JobKeys] | None = None,
) -> list[Job]:
    """Write one job per payload text, in input order; `count` texts in all.

    The texts are read ENQUEUE_CHUNK at a time while the rows before them are written, so a
    lazily encoded iterable has its next chunk encoded while the server takes in the last;
    a text that fails to come (a PayloadError) rolls every row back.

    With a unique key at most one row is written: if a live job holds the key, no row is
    written and every entry of the result is that job.

    `keys`, when given, holds each job's concurrency and fair keys (in input order): the
    rows are written without them, then stamped by key in the same transaction.
    """
    if keys is not None and any(key != NO_KEYS for key in keys):
        with transaction.atomic(using=using):
            jobs = _enqueue(using, queue, texts, count, stamps, now, keys)
    else:
        jobs = _enqueue(using, queue, texts, count, stamps, now, None)
    if stamps.unique_key is None and signals.listened(signals.job_enqueued, Job):
        for job in jobs:  # asked once, not once per job
            signals.announce(signals.job_enqueued, Job, job=job)
    return jobs


def _enqueue(
    using: str,
    queue: str,
    texts: Iterable[str],
    count: int,
    stamps: Stamps,
    now: datetime,
    keys: Sequence[JobKeys] | None,
) -> list[Job]:
    dialect, connection = _dialect_and_connection(using)
    if stamps.unique_key is not None:
        every = list(texts)  # all of them valid before the one row is written
        key = NO_KEYS if keys is None else keys[0]
        return [_enqueue_unique(using, queue, every[0], stamps, now, key)] * len(every)
    jobs: list[Job] = []
    if count == 1:
        # One statement is its own transaction; the bulk path's block and chunking would
        # slow down the most frequent call for nothing.
        (text,) = texts
        job_id = dialect.insert_one(connection, queue, text, stamps)
        jobs.append(stamps.new_job(job_id, queue, decode(text), now))
        dialect.wake_after_insert(connection, queue, single=True)
    else:
        with dialect.insert_many(connection, queue, stamps, count) as write:
            for chunk in _chunks(texts, ENQUEUE_CHUNK):
                jobs.extend(stamps.new_jobs(write(chunk), queue, chunk, now))
        dialect.wake_after_insert(connection, queue, single=False)
    return jobs if keys is None else with_keys(using, jobs, keys)


def with_keys(using: str, jobs: list[Job], keys: Sequence[JobKeys]) -> list[Job]:
    """Stamp each new job's concurrency and fair keys, one UPDATE per pair of keys and chunk
    of ids."""
    by_key: dict[JobKeys, list[int]] = {}
    for job, key in zip(jobs, keys, strict=True):
        if key != NO_KEYS:
            by_key.setdefault(key, []).append(job.id)
    live = QueueMessage.objects.using(using)
    for key, ids in by_key.items():
        for chunk in chunked(ids, 500):
            live.filter(id__in=chunk).update(**key._asdict())
    return [
        job if key.concurrency_key is None
        else dataclasses.replace(job, concurrency_key=key.concurrency_key)
        for job, key in zip(jobs, keys, strict=True)
    ]  # fmt: skip


def _chunks(items: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _enqueue_unique(
    using: str, queue: str, text: str, stamps: Stamps, now: datetime, key: JobKeys
) -> Job:
    dialect, connection = _dialect_and_connection(using)
    assert stamps.unique_key is not None
    for _ in range(KEY_RACE_RETRIES):
        job_id = dialect.insert_unique(connection, queue, text, stamps)
        if job_id is not None:
            dialect.wake_after_insert(connection, queue, single=False)
            job = stamps.new_job(job_id, queue, decode(text), now)
            if key != NO_KEYS:
                (job,) = with_keys(using, [job], [key])
            signals.announce(signals.job_enqueued, Job, job=job)
            return job
        holder = dialect.select_live_by_key(connection, queue, stamps.unique_key)
        if holder is not None:
            return dialect.to_job(holder, now)
        # The holder finished between our INSERT and SELECT: the key is free again.
    raise AlkQueueError(f"unique key {stamps.unique_key!r} kept changing hands; enqueue again")


def claim(
    using: str,
    queue: str,
    worker_id: str,
    n: int,
    now: datetime,
    limits: flow.Limits = flow.NO_LIMITS,
    clock: Callable[[], datetime] | None = None,
    *,
    fair: FairShare | None,
) -> Claimed:
    """Hand out up to n due jobs; lapsed jobs with no attempts left are dead-lettered.

    `fair` says whether the queue takes turns between fair keys (fair_share.py), as the
    caller read it: then it is claimed through its gate by Dialect.fair_claim, within its
    limits if any.
    A queue with limits is claimed through its gate (Dialect.limited_claim), which says
    whether they held the claim back and when its rate frees room; one without keeps its
    dialect's one-statement claim. The limited claim reads `clock` again once it holds the
    gate."""
    dialect, connection = _dialect_and_connection(using)
    if fair is not None:
        claimed = dialect.fair_claim(
            connection, queue, worker_id, n, now, limits, clock, fair.weights
        )
    elif limits.any():
        claimed = dialect.limited_claim(connection, queue, worker_id, n, now, limits, clock)
    else:
        claimed = Claimed(*dialect.claim(connection, queue, worker_id, n, now))
    _announce_deaths(claimed.dead)
    _workflows_after_deaths(using, claimed.dead, now)
    return claimed


def _workflows_after_deaths(using: str, dead: Sequence[Job], now: datetime) -> None:
    """Dead letters a statement of its own made (claim, reclaim, sweep): their workflows
    follow in a transaction right after; the leader's workflow sweep repairs a crash between."""
    if dead:
        with transaction.atomic(using=using):
            finishing.died(using, dead, now)


def ack(
    using: str,
    claims: Sequence[Claim],
    now: datetime,
    entries: Sequence[HistoryEntry | None] | None = None,
    drop_steps: Collection[int] = (),
) -> set[Claim]:
    """The jobs are done: delete each whose claim is still valid. Returns the claims acked.

    A plain job's ack is its dialect's one statement, which leaves the rows marked
    in_workflow (a batch member, or a job something waits for) live; those are acked in one
    transaction with what they settle (_ack_settling): their dependents released, their
    batches counted and fired, so that no crash falls between the ack and its follow-ups.

    `drop_steps` names the jobs among them whose durable steps go with them (those that
    recorded some and that the history does not keep): only then does every ack take a
    transaction and a second statement (docs/durable-steps.md, "The cost").

    `entries` (one per claim; None for a job its queue does not keep) writes each acked job
    that has one to the history, outcome "succeeded", in the ack's own transaction."""
    if not claims:
        return set()
    if drop_steps:
        return set(_ack_settling(using, claims, now, entries, drop_steps))
    dialect, connection = _dialect_and_connection(using)
    done = set(dialect.ack(connection, claims, now, entries, plain_only=True).done)
    if len(done) == len(claims):
        return done
    # Rows marked in_workflow, or claims no longer valid: the second pass tells which.
    rest = [place for place, claim in enumerate(claims) if claim not in done]
    left = [claims[place] for place in rest]
    kept = None if entries is None else [entries[place] for place in rest]
    return done | set(_ack_settling(using, left, now, kept, ()))


def _ack_settling(
    using: str,
    claims: Sequence[Claim],
    now: datetime,
    entries: Sequence[HistoryEntry | None] | None,
    drop_steps: Collection[int],
) -> list[Claim]:
    """ack() in one transaction with what it settles: the durable steps of `drop_steps`
    deleted with their jobs, and the acked rows marked in_workflow settled (their dependents
    released, their batches counted: finishing.succeeded). The ack's DELETE waited for the
    lock of any enqueue with after= that marked a row, so it sees every edge to it."""
    dialect, connection = _dialect_and_connection(using)
    with transaction.atomic(using=using):
        acked = dialect.ack(connection, claims, now, entries)
        gone = [claim.id for claim in acked.done if claim.id in drop_steps]
        if gone:
            dialect.delete_steps(connection, gone)
        finishing.succeeded(using, acked.in_workflows, now)
    return acked.done


def keep_cancelled(using: str, job: Job, now: datetime, done: HistoryEntry | None = None) -> bool:
    """A job cancelled while it ran has stopped: write it to the history, outcome
    "cancelled", when its queue keeps (its live row went with the cancel). `done` carries
    how long its handler ran; without one the queue's keep applies, with no output. Returns
    whether a row was written."""
    if done is None:
        done = history.entry_for(job.queue, None, None)
        if done is None:
            return False
    dialect, connection = _dialect_and_connection(using)
    dialect.keep_finished(connection, [job], "cancelled", now, [done])
    return True


def ack_batch(using: str, queue: str, ids: Sequence[int], now: datetime) -> int:
    """Ack the queue's claimed jobs with a live lease, whichever worker holds them."""
    if not ids:
        return 0
    dialect, connection = _dialect_and_connection(using)
    done = history.entry_for(queue, None, None)  # kept without output when the queue keeps
    wanted = list(dict.fromkeys(ids))
    acked = dialect.ack_batch(connection, queue, wanted, now, done, plain_only=True).done
    if len(acked) == len(wanted):
        return len(acked)
    gone = set(acked)
    with transaction.atomic(using=using):  # the rows marked in_workflow, as in ack()
        rest = dialect.ack_batch(connection, queue, [i for i in wanted if i not in gone], now, done)
        finishing.succeeded(using, rest.in_workflows, now)
    return len(acked) + len(rest.done)


def retry(using: str, claim: Claim, now: datetime, run_at: datetime, error: str | None) -> bool:
    """Back to pending from run_at; the attempt stays counted."""
    dialect, connection = _dialect_and_connection(using)
    error = capped_or_none(error)  # every stored error text passes here or in fail()
    return bool(dialect.retry(connection, claim, now, run_at, error))


def release(using: str, claim: Claim, now: datetime) -> bool:
    """Give a claim back unfinished (graceful shutdown): pending now, the attempt refunded."""
    dialect, connection = _dialect_and_connection(using)
    return bool(dialect.release(connection, claim, now))


def snooze(using: str, claim: Claim, now: datetime, run_at: datetime) -> bool:
    """Back to pending from run_at, the attempt refunded and the last error kept."""
    dialect, connection = _dialect_and_connection(using)
    return bool(dialect.snooze(connection, claim, now, run_at))


def fail(using: str, claim: Claim, now: datetime, reason: str, error: str) -> Job | None:
    """Move a validly claimed job to the dead letters now; None when the claim was lost."""
    dialect, connection = _dialect_and_connection(using)
    with transaction.atomic(using=using):
        row = dialect.fail(connection, claim, now, reason, capped(error))
        if row is None:
            return None
        job = dialect.to_job(row, now)
        finishing.died(using, [job], now)
    _announce_deaths([job])
    return job


def crashed(
    using: str, claim: Claim, now: datetime, retry: CrashRetry | None = None
) -> tuple[bool, Job | None]:
    """The job's handler took its worker down while it held a valid claim (a loop of the
    worker is dying of an error, or its process-pool child ended of its own): pending again
    from `retry.run_at` (default: now) with the attempt and the crash counted, or, at the
    CRASHES_TO_DEAD-th crash, dead ("crashed its worker"); with no attempt left, dead ("max
    attempts exceeded"). Returns (whether the claim was still valid, the dead Job if it
    died)."""
    dialect, connection = _dialect_and_connection(using)
    retry = CrashRetry(now) if retry is None else retry._replace(error=capped_or_none(retry.error))
    with transaction.atomic(using=using):
        valid, row = dialect.crashed(connection, claim, now, CRASHES_TO_DEAD, retry)
        if row is None:
            return valid, None
        job = dialect.to_job(row, now)
        finishing.died(using, [job], now)
    _announce_deaths([job])
    return True, job


def heartbeat(
    using: str,
    heartbeats: Sequence[tuple[Claim, datetime]],
    now: datetime,
    progress: Mapping[Claim, Progress] | None = None,
) -> set[Claim]:
    """Reset each valid claim's lease to its new expiry, writing the running jobs' new
    progress in the same statement; returns the claims extended."""
    if not heartbeats:
        return set()
    dialect, connection = _dialect_and_connection(using)
    return set(dialect.heartbeat(connection, heartbeats, now, progress))


def claims_held(using: str, claims: Sequence[Claim], now: datetime) -> set[Claim]:
    """Of `claims`, those whose row, as last committed, still carries them with a live lease.
    A plain read, waiting for no lock: a heartbeat skips the rows other transactions hold,
    and this tells such a row from a claim that is gone."""
    live = QueueMessage.objects.using(using).filter(lease_expires_at__gt=now)
    wanted = set(claims)
    held: set[Claim] = set()
    for chunk in chunked(claims, _ids_per_statement(using)):
        rows = live.filter(id__in=[claim.id for claim in chunk]).values_list("id", "claim_token")
        held.update(Claim(job_id, token) for job_id, token in rows if token is not None)
    return held & wanted


def cancel(using: str, job_id: int, queue: str | None = None, now: datetime | None = None) -> bool:
    """Remove a live job in any state, unconditionally. Its claimer's ack will be refused.

    A claimed job also leaves a CancelRequest until its handler has stopped, and its worker
    is told: at once by NOTIFY where the database has it (sent at commit), else at its next
    heartbeat, which finds the row gone (docs/running-jobs.md)."""
    return bool(cancel_many(using, [job_id], now or timezone.now(), queue))


def cancel_many(
    using: str, job_ids: Sequence[int], now: datetime, queue: str | None = None
) -> list[int]:
    """cancel() for many live jobs in one transaction, a slice of ids per statement: each
    slice's rows are locked and read (their claimers), then deleted; the workflows they are
    in hear of it once. Returns the ids cancelled, those still live when asked."""
    dialect, connection = _dialect_and_connection(using)
    live = QueueMessage.objects.using(using)
    cancelled: list[int] = []
    held: list[tuple[int, str, str]] = []
    with transaction.atomic(using=using):
        for ids in chunked(job_ids, dialect.ids_per_statement):
            jobs = (
                live.filter(pk__in=ids) if queue is None else live.filter(pk__in=ids, queue=queue)
            )
            rows = list(
                jobs.select_for_update().values_list("id", "queue", "claimed_by", "claim_token")
            )
            found = [job_id for job_id, *_ in rows]
            live.filter(pk__in=found).delete()
            cancelled += found
            held += [(job_id, name, by) for job_id, name, by, token in rows if token and by]
        finishing.cancelled(using, cancelled, now)
        for job_id, name, worker_id in held:
            CancelRequest.objects.using(using).update_or_create(
                job_id=job_id,
                defaults={"queue": name, "worker_id": worker_id, "requested_at": now},
            )
            dialect.notify_cancel(connection, worker_id, job_id)
    return cancelled


def clear_cancel_requests(using: str, job_ids: Sequence[int]) -> list[int]:
    """The handlers of these jobs have stopped: their CancelRequests go. Returns the ids of
    those that had one: the jobs cancelled while they ran (not merely whose claim was lost)."""
    if not job_ids:
        return []
    requests = CancelRequest.objects.using(using).filter(job_id__in=job_ids)
    cleared = list(requests.values_list("job_id", flat=True))
    if cleared:
        CancelRequest.objects.using(using).filter(job_id__in=cleared).delete()
    return cleared


def sweep_cancel_requests(using: str, now: datetime, stale_after: float) -> int:
    """CancelRequests of workers that are gone (no heartbeat for `stale_after` seconds):
    nobody is left to clear them. Returns how many were deleted."""
    cutoff = now - timedelta(seconds=stale_after)
    alive = Worker.objects.using(using).live(now, stale_after).values("worker_id")
    requests = CancelRequest.objects.using(using).filter(requested_at__lt=cutoff)
    return requests.exclude(worker_id__in=alive).delete()[0]


def run_now(using: str, job_ids: Sequence[int], now: datetime) -> int:
    """Scheduled jobs -> pending: run_at = now for the unclaimed ones not yet due; wakes their
    queues' workers. Pending jobs keep their place in line. Returns how many were moved."""
    dialect, connection = _dialect_and_connection(using)
    moved, queues = 0, set[str]()
    with transaction.atomic(using=using):
        for ids in chunked(job_ids, dialect.ids_per_statement):
            later = QueueMessage.objects.using(using).filter(pk__in=ids).scheduled(now)
            queues.update(later.values_list("queue", flat=True))
            moved += later.update(run_at=now)
        for name in sorted(queues):
            dialect.notify(connection, name)
    return moved


def change_priority(using: str, job_ids: Sequence[int], priority: int) -> int:
    """Set the priority of live jobs in any state (a claimed job keeps it for its retries)."""
    validation.priority(priority)
    live = QueueMessage.objects.using(using)
    with transaction.atomic(using=using):
        return sum(
            live.filter(pk__in=ids).update(priority=priority)
            for ids in chunked(job_ids, _ids_per_statement(using))
        )


def _ids_per_statement(using: str) -> int:
    return dialect_for(connections[using]).ids_per_statement


def pause(using: str, queues: Sequence[str]) -> int:
    """Workers stop claiming from these queues within one poll interval; jobs stay put."""
    return _set_paused(using, queues, True)


def resume(using: str, queues: Sequence[str]) -> int:
    return _set_paused(using, queues, False)


def _set_paused(using: str, queues: Sequence[str], paused: bool) -> int:
    consumers = Consumer.objects.using(using)
    with transaction.atomic(using=using):
        return sum(
            consumers.filter(queue__in=names).update(paused=paused)
            for names in chunked(queues, _ids_per_statement(using))
        )


def purge_dead_letters(using: str, dead_letter_ids: Sequence[int]) -> int:
    """Delete the given dead letters (by row id); returns how many were deleted."""
    dead = DeadLetter.objects.using(using)
    with transaction.atomic(using=using):
        return sum(
            dead.filter(pk__in=ids).delete()[0]
            for ids in chunked(dead_letter_ids, _ids_per_statement(using))
        )


def get_job(using: str, job_id: int, now: datetime, queue: str | None = None) -> Job | None:
    """The live job, else the dead letter, else the job in the history with this id; a
    claimed job with the progress it last reported."""
    dialect, connection = _dialect_and_connection(using)
    row = dialect.select_job(connection, job_id, queue)
    if row is None:
        return dialect.select_history(connection, job_id, queue)
    job = dialect.to_job(row, now)
    if job.state == "waiting":
        return waits.with_reason(using, dependencies.restore_run_at(using, job))
    if job.state != "claimed":
        return job
    reported = QueueMessage.objects.using(using).filter(pk=job_id)
    stored = reported.values_list("progress", "progress_at").first()
    progress = None if stored is None else stored_progress(*stored)
    return job if progress is None else dataclasses.replace(job, progress=progress)


class _KeyTaken(Exception):
    def __init__(self, holder: int) -> None:
        self.holder = holder


def requeue(using: str, job_id: int, now: datetime, queue: str | None = None) -> Job | None:
    """Dead letter -> live job with the same id, payload, options and keys; attempts reset.

    Deleting the dead letter comes first, so of two concurrent requeues only one finds it.
    If a live job holds the same unique key, the dead letter stays and that job is returned.
    """
    dialect, connection = _dialect_and_connection(using)
    try:
        with transaction.atomic(using=using):
            taken = dialect.take_dead_letter(connection, job_id, queue)
            if taken is None:
                return None
            dead = dialect.to_job(taken.row, now)
            _revive(using, dead, taken.fair_key, now)
            dialect.notify(connection, dead.queue)
            for dependent in finishing.requeued(using, dead, now):
                requeue(using, dependent, now)  # the jobs that died for it wait again
            # Read before the commit: once committed, a worker may claim and finish it at once.
            job = get_job(using, job_id, now)
    except _KeyTaken as taken:
        return get_job(using, taken.holder, now)
    if job is not None:
        signals.announce(signals.job_enqueued, Job, job=job)
    return job


@dataclasses.dataclass(frozen=True)
class RequeueRun:
    """What one requeue of several dead letters did, dead letter by dead letter."""

    #: The dead letter ids the run was asked for.
    asked: list[int]
    #: (dead letter id, id of the live job it became): the same id the job had before.
    requeued: list[tuple[int, int]]
    #: (dead letter id, live job holding its unique key): these stay dead letters.
    kept: list[tuple[int, int]]
    #: Dead letter ids someone else requeued or deleted first.
    gone: list[int]


def requeue_each(
    using: str, rows: Sequence[tuple[int, int]], asked: Sequence[int], now: datetime
) -> RequeueRun:
    """requeue() each (dead letter id, job id), one transaction each, and sort the outcomes.
    Asked-for ids that were not requeued and not kept are gone: someone else was first."""
    requeued: list[tuple[int, int]] = []
    kept: list[tuple[int, int]] = []
    for dead_id, job_id in rows:
        job = requeue(using, job_id, now)
        if job is not None and job.id == job_id:
            requeued.append((dead_id, job_id))
        elif job is not None:  # the live job holding the same unique key
            kept.append((dead_id, job.id))
    done = {dead_id for dead_id, _ in requeued + kept}
    return RequeueRun(list(asked), requeued, kept, [i for i in asked if i not in done])


@dataclasses.dataclass(frozen=True)
class RequeuedFromStep:
    """What requeue_from_step() did to one job's dead letter."""

    #: The job asked for.
    job_id: int
    #: Its dead letter's id; None when it had none (requeued or deleted by someone else).
    dead_letter_id: int | None
    #: The live job the dead letter became; or, when a live job holds the same unique key,
    #: that job (the dead letter stays); None when the dead letter was gone.
    job: Job | None
    #: The names of the steps deleted, in the order they were recorded.
    dropped: list[str]

    @property
    def requeued(self) -> bool:
        return self.job is not None and self.job.id == self.job_id


def requeue_from_step(using: str, job_id: int, step: str, now: datetime) -> RequeuedFromStep:
    """requeue() the dead letter of `job_id` and delete its durable step `step` and every
    step recorded after it (by recorded_at, then id), in one transaction: the job runs again
    from that step on (docs/durable-steps.md). InvalidOption, nothing written, when the
    dead letter has no step of that name."""
    steps = JobStep.objects.using(using).filter(job_id=job_id)
    with transaction.atomic(using=using):
        dead_id = (
            DeadLetter.objects.using(using)
            .filter(job_id=job_id)
            .values_list("pk", flat=True)
            .first()
        )
        if dead_id is None:
            return RequeuedFromStep(job_id, None, None, [])
        recorded = list(steps.order_by("recorded_at", "id").values_list("id", "name"))
        names = [name for _, name in recorded]
        if step not in names:
            raise InvalidOption(f"job {job_id} has no recorded step {step!r}")
        job = requeue(using, job_id, now)
        if job is None or job.id != job_id:
            return RequeuedFromStep(job_id, dead_id, job, [])
        dropped = recorded[names.index(step) :]
        steps.filter(id__in=[pk for pk, _ in dropped]).delete()
    return RequeuedFromStep(job_id, dead_id, job, [name for _, name in dropped])


def _revive(using: str, dead: Job, fair_key: str | None, now: datetime) -> None:
    for _ in range(KEY_RACE_RETRIES):
        try:
            with transaction.atomic(using=using):
                QueueMessage.objects.using(using).create(
                    id=dead.id, queue=dead.queue, payload=dead.payload, priority=dead.priority,
                    attempts=0, max_attempts=dead.max_attempts, backoff_base=dead.backoff_base,
                    lease=dead.lease, retention=dead.retention, run_at=now,
                    enqueued_at=dead.enqueued_at, requeued_at=now,
                    expires_at=_same_lifetime(dead, now),
                    unique_key=dead.unique_key, last_error=dead.last_error,
                    concurrency_key=dead.concurrency_key, fair_key=fair_key,
                    trace_context=dead.trace_context,
                )  # fmt: skip
            return
        except IntegrityError:
            holder = (
                QueueMessage.objects.using(using)
                .filter(queue=dead.queue, unique_key=dead.unique_key)
                .values_list("id", flat=True)
                .first()
            )
            if holder is not None:
                raise _KeyTaken(holder) from None
    raise AlkQueueError(f"unique key {dead.unique_key!r} kept changing hands; requeue again")


def _same_lifetime(dead: Job, now: datetime) -> datetime | None:
    """A requeued job gets the lifetime it was enqueued with, counted from now."""
    if dead.expires_at is None:
        return None
    return now + (dead.expires_at - (dead.requeued_at or dead.enqueued_at))


def sweep_expired(using: str, queue: str, now: datetime, retention: float | None) -> int:
    """Expired live jobs (any state) -> dead letters; dead letters past retention deleted."""
    dialect, connection = _dialect_and_connection(using)
    with transaction.atomic(using=using):
        rows = dialect.sweep_expired(connection, queue, now, EXPIRED)
        dead = _jobs(using, rows, now)
        finishing.died(using, dead, now)
    _announce_deaths(dead)
    if retention is not None:
        cutoff = now - timedelta(seconds=retention)
        DeadLetter.objects.using(using).filter(queue=queue, died_at__lt=cutoff).delete()
    return len(rows)


def purge(using: str, queue: str, states: Iterable[str], now: datetime) -> int:
    removed = 0
    live = QueueMessage.objects.using(using).filter(queue=queue)
    for state in dict.fromkeys(states):
        if state == "dead":
            removed += DeadLetter.objects.using(using).filter(queue=queue).delete()[0]
        elif not sweep.any_open(using):
            removed += live.in_state(state, now).delete()[0]
        else:  # a purged job is a cancelled one to the workflows it is in
            with transaction.atomic(using=using):
                ids = list(live.in_state(state, now).values_list("id", flat=True))
                for chunk in chunked(ids, _ids_per_statement(using)):
                    removed += live.filter(id__in=chunk).delete()[0]
                finishing.cancelled(using, ids, now)
    return removed


def stats(using: str, queue: str, now: datetime) -> QueueStats:
    unclaimed = Q(claim_token__isnull=True)
    due = unclaimed & Q(run_at__lte=now)
    live = (
        QueueMessage.objects.using(using)
        .filter(queue=queue)
        .aggregate(
            pending=Count("id", filter=due),
            scheduled=Count("id", filter=unclaimed & Q(run_at__gt=now)),
            waiting=Count("id", filter=unclaimed & Q(run_at__isnull=True)),
            claimed=Count("id", filter=Q(claim_token__isnull=False)),
            oldest=Min("run_at", filter=due),
        )
    )
    dead = DeadLetter.objects.using(using).filter(queue=queue).count()
    oldest = live["oldest"]
    age = max((now - oldest).total_seconds(), 0.0) if oldest is not None else 0.0
    return QueueStats(
        live["pending"], live["scheduled"], live["claimed"], dead, age, live["waiting"]
    )


def depth(using: str, queue: str) -> int:
    return QueueMessage.objects.using(using).filter(queue=queue).count()


def depth_pending(using: str, queue: str, now: datetime) -> int:
    return QueueMessage.objects.using(using).filter(queue=queue).pending(now).count()


def has_due(using: str, queue: str, now: datetime) -> bool:
    """Whether `queue` has a due, unclaimed, unexpired job, by a read that takes no lock: a
    claim skips the rows other transactions hold locked (SKIP LOCKED), so a claim that found
    nothing does not prove that nothing is due (index alkqueue_pending_idx)."""
    due = QueueMessage.objects.using(using).filter(queue=queue).pending(now)
    return due.exclude(expires_at__lte=now).exists()


def reclaim(using: str, now: datetime) -> tuple[list[int], list[Job]]:
    """Lapsed leases: back to pending with attempts left, else dead ("max attempts exceeded").

    The lapsed attempt stays counted (attempts are counted at claim time, never refunded).
    """
    dialect, connection = _dialect_and_connection(using)
    with transaction.atomic(using=using):
        pending, rows = dialect.reclaim(connection, now)
        dead = _jobs(using, rows, now)
        finishing.died(using, dead, now)
    _announce_deaths(dead)
    return pending, dead


def sweep_everywhere(using: str, now: datetime) -> int:
    """The worker's sweep: expired jobs of every queue -> dead letters; each dead letter is
    deleted once older than the retention stamped on its job, and each unique window once
    lapsed (docs/queues.md, "Unique windows"). Returns the number moved."""
    dialect, connection = _dialect_and_connection(using)
    with transaction.atomic(using=using):
        rows = dialect.sweep_expired(connection, None, now, EXPIRED)
        dead = _jobs(using, rows, now)
        finishing.died(using, dead, now)
    _announce_deaths(dead)
    dialect.delete_old_dead_letters(connection, now)
    dialect.sweep_unique_windows(connection, now)
    return len(rows)


def sweep_fair_claims(using: str, now: datetime, batch: int) -> int:
    """Delete up to `batch` fair claim buckets that started more than FAIR_CLAIMS_KEPT before
    `now` (docs/fair-share.md, "Share of claims"). Returns how many went."""
    dialect, connection = _dialect_and_connection(using)
    return dialect.sweep_fair_claims(connection, now - FAIR_CLAIMS_KEPT, batch)


def sweep_history(using: str, now: datetime, batch: int) -> int:
    """Delete the jobs in the history past their delete_after, `batch` at a time (PostgreSQL: drops
    each day partition whose rows are all past it). Returns how many rows went."""
    dialect, connection = _dialect_and_connection(using)
    return dialect.sweep_history(connection, now, batch)


def prepare_history(using: str, now: datetime) -> int:
    """Create the history's room ahead of `now` (PostgreSQL: the coming days' partitions);
    returns how many partitions were created."""
    dialect, connection = _dialect_and_connection(using)
    return dialect.prepare_history(connection, now)


def record_step(
    using: str, claim: Claim, now: datetime, name: str, value: str, duration: float
) -> bool:
    """A durable step of a claimed job: record its value (JSON text) under `name`, fenced by
    the claim. Returns False, nothing written, when the claim is no longer valid."""
    dialect, connection = _dialect_and_connection(using)
    return dialect.record_step(connection, claim, now, name, value, duration)


def load_steps(using: str, job_id: int) -> dict[str, str]:
    """The durable steps a job recorded: each name's value, as JSON text."""
    dialect, connection = _dialect_and_connection(using)
    return dialect.load_steps(connection, job_id)


def load_claimed_steps(
    using: str, claims: Sequence[Claim], now: datetime
) -> dict[int, dict[str, str]]:
    """The durable steps of the jobs of `claims` (one claim's, say) in one statement per
    chunk: by job id, each name's value as JSON text, for the jobs whose claim is still
    valid at `now`; the others are left out."""
    dialect, connection = _dialect_and_connection(using)
    return dialect.load_claimed_steps(connection, claims, now)


def sweep_steps(using: str, batch: int) -> int:
    """Delete up to `batch` durable steps of jobs that are gone (cancelled, purged, expired
    from the dead letters or the history). Returns how many were deleted."""
    dialect, connection = _dialect_and_connection(using)
    return dialect.sweep_steps(connection, batch)


def lock_claim(using: str, claim: Claim, now: datetime) -> bool:
    """Inside the caller's transaction: hold a valid claim's row until commit."""
    dialect, connection = _dialect_and_connection(using)
    return bool(dialect.lock_claim(connection, claim, now))


# -- flow control: the operator's overrides ------------------------------------------------

_KEEP: Any = object()


def set_limits(
    queue: str,
    *,
    concurrency: Any = _KEEP,
    key_concurrency: Any = _KEEP,
    rate: Any = _KEEP,
    key_rate: Any = _KEEP,
    using: str = "default",
) -> LimitsInForce:
    """Override the queue's limits on its Consumer row: each one given (None: no limit)
    wins over the code and the settings, across worker restarts, until reset_limits. Limits
    not given keep their current override, if any. Returns the limits now in force.

    InvalidOption, and nothing written, for a bad value or a queue without a Consumer row
    (one is written when a worker first serves the queue)."""
    validation.queue_name(queue)
    validation.database_alias(using)
    given = {"concurrency": concurrency, "key_concurrency": key_concurrency,
             "rate": rate, "key_rate": key_rate}  # fmt: skip
    chosen = {name: flow.parse(name, value) for name, value in given.items() if value is not _KEEP}
    with transaction.atomic(using=using):
        row = Consumer.objects.using(using).select_for_update().filter(queue=queue).first()
        if row is None:
            raise InvalidOption(
                f"queue {queue!r} has no Consumer row to hold its limits: start a worker "
                "serving it first, or set the limits in code or in ALKQUEUE['QUEUES']"
            )
        stored = row.limit_overrides
        overrides = dict(stored) if isinstance(stored, dict) else {}  # a hand-written column
        overrides.update({name: flow.stored_value(value) for name, value in chosen.items()})
        Consumer.objects.using(using).filter(pk=row.pk).update(limit_overrides=overrides)
    _limits_changed(using)
    return flow.limits_in_force(queue, using=using)


def _limits_changed(using: str) -> None:
    """This process's kept limits are read again: now (a claim inside the same transaction
    sees the change) and once it commits (so does every other connection)."""
    flow.CHANGES.bump()
    transaction.on_commit(flow.CHANGES.bump, using=using)


def reset_limits(queue: str, *, using: str = "default") -> LimitsInForce:
    """Drop the queue's overrides: the code's (or the settings') limits apply again. A queue
    without a Consumer row has no overrides; nothing is written then."""
    validation.queue_name(queue)
    validation.database_alias(using)
    Consumer.objects.using(using).filter(queue=queue).update(limit_overrides={})
    _limits_changed(using)
    return flow.limits_in_force(queue, using=using)


# -- fair share: the operator's weights ----------------------------------------------------


def fair_share_in_force(queue: str, *, using: str = "default") -> FairShare | None:
    """The queue's FairShare while it takes turns, else None, read now; the probe is the
    dialect's (a prepared statement on PostgreSQL). Queue.claim reads it before each claim,
    a worker once a second (fair_share.FairShareCache)."""
    dialect, connection = _dialect_and_connection(using)
    if not dialect.uses_fair_keys(connection, queue):
        return None
    return FairShare(fair_share.weights_in_force(queue, using=using))


def set_fair_weight(queue: str, key: str, weight: int | None, *, using: str = "default") -> int:
    """Set the weight of a fair key of the queue on its Consumer row (None: drop it, so the
    settings' weight, else 1, applies again). It wins over ALKQUEUE["QUEUES"][queue]
    ["fair_weights"] across worker restarts. Returns the key's weight now in force.

    InvalidOption, and nothing written, for a bad key or weight or a queue without a
    Consumer row (one is written when a worker first serves the queue)."""
    validation.queue_name(queue)
    validation.database_alias(using)
    checked = validation.fair_key(key)
    if checked is None:
        raise InvalidOption("set_fair_weight needs a fair key")
    chosen = None if weight is None else validation.fair_weight(weight)
    with transaction.atomic(using=using):
        row = Consumer.objects.using(using).select_for_update().filter(queue=queue).first()
        if row is None:
            raise InvalidOption(
                f"queue {queue!r} has no Consumer row to hold its fair weights: start a worker "
                "serving it first, or set them in ALKQUEUE['QUEUES']"
            )
        weights = fair_share.stored_weights(row.fair_weights)
        if chosen is None:
            weights.pop(checked, None)
        else:
            weights[checked] = chosen
        Consumer.objects.using(using).filter(pk=row.pk).update(fair_weights=weights)
    return fair_share.weights_in_force(queue, using=using).get(checked, 1)
