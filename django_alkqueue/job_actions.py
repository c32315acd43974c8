"""The state changes of `manage.py alk_jobs`: each runs the operations the admin's actions
run (operations.py) over the rows a JobFilter selects, writes the admin's audit entries
(audit.py), and returns what it changed (docs/operations.md, "alk_jobs").

Rows are taken SLICE at a time, in id order, each slice one bounded list of ids in memory
and one audit entry, as one run of the admin's action: cancels are a few statements per
slice (operations.cancel_many); requeues are one operations.requeue per dead letter, as the
admin's, until operations has a requeue over sets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from . import limits as flow
from . import operations, waits
from .audit import CHANGE, DELETION, Actor, record, record_requeue
from .job_filters import JobFilter, dead_letters, live_jobs
from .limits import LimitsInForce
from .models import Consumer, DeadLetter, QueueMessage

#: Rows per slice (the admin's most rows per action run, admin/selection.py).
SLICE = 10_000


@dataclasses.dataclass(frozen=True)
class Requeued:
    """What a requeue did, by job id."""

    #: Dead letters that are live jobs again, under the same ids.
    requeued: list[int] = dataclasses.field(default_factory=list)
    #: (job id, live job holding its unique key): these stay dead letters.
    kept: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    #: Requeued or deleted by someone else first.
    gone: list[int] = dataclasses.field(default_factory=list)

    def __add__(self, other: Requeued) -> Requeued:
        return Requeued(self.requeued + other.requeued, self.kept + other.kept,
                        self.gone + other.gone)  # fmt: skip


def slices(
    rows: QuerySet[Any], key: str, fields: Sequence[str], limit: int | None
) -> Iterator[list[Any]]:
    """The rows' `fields` (a tuple each; the value alone for one field), SLICE at a time in
    `key` order, at most `limit` in all. Each slice is read after the last one was acted
    on: the rows it changed have left the set, and `key` goes on past them."""
    left = limit
    last: Any = None
    while left is None or left > 0:
        page = rows.order_by(key) if last is None else rows.filter(**{f"{key}__gt": last})
        size = SLICE if left is None else min(SLICE, left)
        taken = list(page.order_by(key).values_list(key, *fields)[:size])
        if not taken:
            return
        last = taken[-1][0]
        yield [row[1:] if len(fields) > 1 else row[1] for row in taken]
        if left is not None:
            left -= len(taken)


def requeue(
    using: str, found: JobFilter, actor: Actor | None, now: datetime, limit: int | None = None
) -> Requeued:
    """Requeue the dead letters that match: each a live job again, with the same id,
    payload and options, attempts reset, due now (operations.requeue)."""
    done = Requeued()
    for rows in slices(dead_letters(using, found, now), "pk", ("pk", "job_id"), limit):
        run = operations.requeue_each(using, rows, [dead for dead, _ in rows], now)
        if actor is not None:
            record_requeue(actor, run)
        job_of = dict(rows)
        done += Requeued(
            [job for _, job in run.requeued],
            [(job_of[dead], holder) for dead, holder in run.kept],
            [job_of[dead] for dead in run.gone],
        )
    return done


def requeue_from_step(
    using: str, job_id: int, step: str, actor: Actor | None, now: datetime
) -> operations.RequeuedFromStep:
    """Requeue the dead letter of one job, its durable step `step` and every step recorded
    after it deleted (operations.requeue_from_step), and write the requeue's audit entry
    (audit.record_requeue), which says from which step and which steps went. InvalidOption,
    nothing written, when the dead letter has no step of that name."""
    done = operations.requeue_from_step(using, job_id, step, now)
    if actor is not None:
        dead = [] if done.dead_letter_id is None else [done.dead_letter_id]
        requeued = [(d, job_id) for d in dead if done.requeued]
        kept = [(d, done.job.id) for d in dead if done.job is not None and not done.requeued]
        gone = [] if done.job is not None else dead
        dropped = ", ".join(repr(name) for name in done.dropped) or "none"
        detail = f"from step {step!r} of job {job_id}: steps deleted {dropped}"
        record_requeue(actor, operations.RequeueRun(dead, requeued, kept, gone), detail)
    return done


def cancel(
    using: str, found: JobFilter, actor: Actor | None, now: datetime, limit: int | None = None
) -> list[int]:
    """Cancel the live jobs that match, whatever their state (operations.cancel_many): a
    claimed job's worker is told to stop. Returns the ids cancelled."""
    cancelled: list[int] = []
    for ids in slices(live_jobs(using, found, now), "id", ("id",), limit):
        gone = operations.cancel_many(using, ids, now)
        if gone and actor is not None:
            record(actor, QueueMessage, "cancel", gone, DELETION)
        cancelled += gone
    return cancelled


def signal(
    using: str, job_id: int, name: str, payload: Any, actor: Actor | None, now: datetime
) -> bool:
    """Send the signal `name` to the live job `job_id`, whatever its queue (Queue.signal's
    rules); audited when it was delivered. Returns whether it was."""
    sent = waits.send(using, job_id, name, payload, now)
    if sent and actor is not None:
        record(actor, QueueMessage, "signal", [job_id], CHANGE, f"signal {name!r}")
    return sent


def purge(using: str, queue: str, state: str, actor: Actor | None, now: datetime) -> int:
    """Delete the queue's jobs in `state` (pending, scheduled, waiting; dead: its dead
    letters) with operations.purge, a few statements whatever their number. Returns how
    many went."""
    removed = operations.purge(using, queue, [state], now)
    if removed and actor is not None:
        model = DeadLetter if state == "dead" else QueueMessage
        record(actor, model, "purge", [], DELETION, f"queue {queue}, {state}", count=removed)
    return removed


def pause(using: str, queues: Sequence[str], actor: Actor | None) -> list[str]:
    """Workers stop claiming from these queues within one poll interval (operations.pause).
    Returns the queues paused: those with a Consumer row."""
    return _set_paused(using, queues, actor, operations.pause, "pause")


def resume(using: str, queues: Sequence[str], actor: Actor | None) -> list[str]:
    return _set_paused(using, queues, actor, operations.resume, "resume")


def _set_paused(
    using: str,
    queues: Sequence[str],
    actor: Actor | None,
    change: Callable[[str, Sequence[str]], int],
    verb: str,
) -> list[str]:
    rows = _consumers(using, queues)
    if rows:
        change(using, [name for _, name in rows])
        if actor is not None:
            names = ", ".join(name for _, name in rows)
            record(actor, Consumer, verb, [pk for pk, _ in rows], detail=f"queues {names}")
    return [name for _, name in rows]


def set_limits(
    using: str,
    queues: Sequence[str],
    changes: dict[str, int | flow.Rate | None],
    actor: Actor | None,
) -> dict[str, LimitsInForce]:
    """Override these limits of the queues (operations.set_limits; None: no limit), each a
    queue with a Consumer row. Returns the limits now in force, by queue."""
    rows = _consumers(using, queues)
    now_in_force = {name: operations.set_limits(name, **changes, using=using) for _, name in rows}
    if rows and actor is not None:
        described = ", ".join(f"{name}={'no limit' if value is None else value}"
                              for name, value in changes.items())  # fmt: skip
        names = ", ".join(name for _, name in rows)
        record(actor, Consumer, "set limits", [pk for pk, _ in rows],
               detail=f"queues {names}: {described}")  # fmt: skip
    return now_in_force


def reset_limits(
    using: str, queues: Sequence[str], actor: Actor | None
) -> dict[str, LimitsInForce]:
    """Drop the queues' overrides: the code's (or the settings') limits apply again."""
    rows = _consumers(using, queues)
    now_in_force = {name: operations.reset_limits(name, using=using) for _, name in rows}
    if rows and actor is not None:
        names = ", ".join(name for _, name in rows)
        record(actor, Consumer, "reset limits", [pk for pk, _ in rows], detail=f"queues {names}")
    return now_in_force


def _consumers(using: str, queues: Sequence[str]) -> list[tuple[int, str]]:
    """(pk, queue) of the queues' Consumer rows, by name: a queue without one has nothing a
    pause or a limit could be written to (a worker writes it when it first serves it)."""
    rows = Consumer.objects.using(using).filter(queue__in=list(queues)).order_by("queue")
    return list(rows.values_list("pk", "queue"))


def set_fair_weight(
    using: str, queue: str, key: str, weight: int | None, actor: Actor | None
) -> int:
    """Set a fair key's weight on the queue's Consumer row (operations.set_fair_weight; None:
    drop it), audited under the Consumer. Returns the key's weight now in force."""
    now_in_force = operations.set_fair_weight(queue, key, weight, using=using)
    rows = _consumers(using, [queue])
    if rows and actor is not None:
        shown = "dropped" if weight is None else str(weight)
        record(actor, Consumer, "set fair weight", [pk for pk, _ in rows],
               detail=f"queue {queue}: fair key {key} weight {shown}")  # fmt: skip
    return now_in_force
