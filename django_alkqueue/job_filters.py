"""The operator's filters over live jobs and dead letters: which rows `alk_jobs` lists and acts
on (docs/operations.md, "alk_jobs"). Reads only: the QuerySets of the rows that match.

A job is named by its job id everywhere, dead or alive (a dead letter keeps the id its job
had). `--error` is an error group's fingerprint (error_groups.py, the admin's `?error=`) or a
piece of the error text; `--older-than` counts from the enqueue of a live job and from the
death of a dead letter; `--key` is a unique or a concurrency key, and finds no row of a
sensitive queue unless the operator may see its keys (the admin's rule, privacy.py).
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timedelta
from functools import reduce
from operator import or_
from typing import Any, TypeVar

from django.db.models import Q, QuerySet

from .error_groups import FINGERPRINT_LENGTH
from .jobs import LIVE_STATES, Job, live_state
from .models import DeadLetter, QueueMessage
from .privacy import masked, masked_key

#: The states a filter names: the live ones and "dead" (the dead letters).
STATES = (*LIVE_STATES, "dead")
M = TypeVar("M", QueueMessage, DeadLetter)
_FINGERPRINT = re.compile(rf"[0-9a-f]{{{FINGERPRINT_LENGTH}}}")


@dataclasses.dataclass(frozen=True)
class JobFilter:
    """What the rows must match; an empty field matches every row."""

    ids: tuple[int, ...] = ()
    queues: tuple[str, ...] = ()
    #: Of STATES; empty: every state, dead letters included.
    states: tuple[str, ...] = ()
    #: An error group's fingerprint, or text the last error holds (case-insensitive).
    error: str | None = None
    #: Seconds since the enqueue (live jobs) or the death (dead letters).
    older_than: float | None = None
    #: A unique or concurrency key.
    key: str | None = None
    #: Queues whose rows `key` may not find (the sensitive ones the operator may not see).
    key_hidden: frozenset[str] = frozenset()

    def any(self) -> bool:
        """Whether the filter narrows anything: an action over every row must be asked for
        by name, never be the default."""
        return bool(self.ids or self.queues or self.states or self.error or self.key
                    or self.older_than is not None)  # fmt: skip

    def wants_live(self) -> bool:
        return not self.states or any(state != "dead" for state in self.states)

    def wants_dead(self) -> bool:
        return not self.states or "dead" in self.states

    def by_group(self) -> bool:
        """Whether `error` names an error group (a fingerprint) rather than text."""
        return self.error is not None and _FINGERPRINT.fullmatch(self.error) is not None


def live_jobs(using: str, found: JobFilter, now: datetime) -> QuerySet[QueueMessage]:
    """The live jobs that match, newest first (by id)."""
    rows = QueueMessage.objects.using(using)
    if not found.wants_live() or found.by_group():  # live rows carry no error group
        return rows.none()
    live_states = [state for state in found.states if state != "dead"]
    if live_states:
        rows = reduce(or_, (rows.in_state(state, now) for state in live_states))
    if found.older_than is not None:
        rows = rows.filter(enqueued_at__lt=now - timedelta(seconds=found.older_than))
    return _common(rows, found, "id").order_by("-id")


def dead_letters(using: str, found: JobFilter, now: datetime) -> QuerySet[DeadLetter]:
    """The dead letters that match, newest job first."""
    rows = DeadLetter.objects.using(using)
    if not found.wants_dead():
        return rows.none()
    if found.by_group():
        rows = rows.filter(error_fingerprint=found.error)
    if found.older_than is not None:
        rows = rows.filter(died_at__lt=now - timedelta(seconds=found.older_than))
    return _common(rows, found, "job_id").order_by("-job_id")


def _common(rows: QuerySet[M], found: JobFilter, id_field: str) -> QuerySet[M]:  # noqa: UP047
    """The filters live jobs and dead letters share."""
    if found.ids:
        rows = rows.filter(**{f"{id_field}__in": list(found.ids)})
    if found.queues:
        rows = rows.filter(queue__in=list(found.queues))
    if found.error is not None and not found.by_group():
        rows = rows.filter(last_error__icontains=found.error)
    if found.key is not None:
        rows = rows.filter(Q(unique_key=found.key) | Q(concurrency_key=found.key))
        if found.key_hidden:
            rows = rows.exclude(queue__in=list(found.key_hidden))
    return rows


# -- the rows as listed ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ListedJob:
    """One row as `alk_jobs list` shows it, live job or dead letter alike."""

    id: int
    queue: str
    state: str
    priority: int
    attempts: int
    max_attempts: int
    enqueued_at: datetime
    #: When it is due; None for a waiting job (its dependencies decide) and a dead letter.
    run_at: datetime | None
    claimed_by: str | None
    died_at: datetime | None
    reason: str | None
    unique_key: str | None
    concurrency_key: str | None
    #: What the claim takes turns between (docs/fair-share.md); a dead letter keeps it.
    fair_key: str | None
    #: The last error's first line.
    error: str | None
    #: A dead letter's error group (its fingerprint; the admin's `?error=`).
    error_group: str | None
    payload: Any

    def masked(self) -> ListedJob:
        """The row as one who may not see the queue's payloads sees it (privacy.py)."""
        return dataclasses.replace(
            self, payload=masked(self.payload), unique_key=masked_key(self.unique_key),
            concurrency_key=masked_key(self.concurrency_key), fair_key=masked_key(self.fair_key),
        )  # fmt: skip


def masked_job(job: Job) -> Job:
    """A job as one who may not see its queue's payloads sees it: payload, recorded output
    and keys masked (privacy.py)."""
    return dataclasses.replace(
        job, payload=masked(job.payload), output=masked(job.output),
        unique_key=masked_key(job.unique_key), concurrency_key=masked_key(job.concurrency_key),
    )  # fmt: skip


_LIVE_FIELDS = ("id", "queue", "priority", "attempts", "max_attempts", "enqueued_at", "run_at",
                "claim_token", "claimed_by", "unique_key", "concurrency_key", "fair_key",
                "last_error", "payload")  # fmt: skip
_DEAD_FIELDS = ("job_id", "queue", "priority", "attempts", "max_attempts", "enqueued_at",
                "claimed_by", "died_at", "reason", "unique_key", "concurrency_key", "fair_key",
                "last_error", "error_fingerprint", "payload")  # fmt: skip


def listed(using: str, found: JobFilter, now: datetime, limit: int) -> list[ListedJob]:
    """The `limit` newest rows (by job id) that match, live jobs and dead letters merged."""
    live = [
        _live_row(row, now) for row in live_jobs(using, found, now).values(*_LIVE_FIELDS)[:limit]
    ]
    dead = [_dead_row(row) for row in dead_letters(using, found, now).values(*_DEAD_FIELDS)[:limit]]
    return sorted(live + dead, key=lambda job: -job.id)[:limit]


def _first_line(text: str | None) -> str | None:
    return None if text is None else text.split("\n", 1)[0]


def _live_row(row: dict[str, Any], now: datetime) -> ListedJob:
    state = live_state(row["claim_token"] is not None, row["run_at"], now)
    return ListedJob(
        id=row["id"], queue=row["queue"], state=state, priority=row["priority"],
        attempts=row["attempts"], max_attempts=row["max_attempts"],
        enqueued_at=row["enqueued_at"],
        run_at=row["run_at"],
        claimed_by=row["claimed_by"], died_at=None, reason=None,
        unique_key=row["unique_key"], concurrency_key=row["concurrency_key"],
        fair_key=row["fair_key"], error=_first_line(row["last_error"]), error_group=None,
        payload=row["payload"],
    )  # fmt: skip


def _dead_row(row: dict[str, Any]) -> ListedJob:
    return ListedJob(
        id=row["job_id"], queue=row["queue"], state="dead", priority=row["priority"],
        attempts=row["attempts"], max_attempts=row["max_attempts"],
        enqueued_at=row["enqueued_at"], run_at=None, claimed_by=row["claimed_by"],
        died_at=row["died_at"], reason=row["reason"], unique_key=row["unique_key"],
        concurrency_key=row["concurrency_key"], fair_key=row["fair_key"],
        error=_first_line(row["last_error"]), error_group=row["error_fingerprint"],
        payload=row["payload"],
    )  # fmt: skip


def fair_key_of(using: str, job_id: int) -> str | None:
    """The fair key of the live job or dead letter with this id (`Job` does not carry it);
    None for a job in the history, which has none."""
    live = QueueMessage.objects.using(using).filter(id=job_id).values_list("fair_key", flat=True)
    dead = DeadLetter.objects.using(using).filter(job_id=job_id)
    return live.first() or dead.values_list("fair_key", flat=True).first()
