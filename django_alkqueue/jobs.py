"""The value objects handed to callers: `Job` and `QueueStats`, and those the drivers take:
`Stamps`, `Progress`, `HistoryEntry`. Frozen; built from rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple, TypeVar

from .payload import decode, encode

State = Literal["waiting", "pending", "scheduled", "claimed", "dead", "succeeded", "cancelled"]
#: The states of live rows: "waiting" for its dependencies or a signal (no run_at:
#: docs/workflows.md), then due later, due now, running.
LIVE_STATES: tuple[State, ...] = ("waiting", "pending", "scheduled", "claimed")
STATES: tuple[State, ...] = (*LIVE_STATES, "dead")
#: The outcomes a job in the history (docs/running-jobs.md, "History") finished with.
HISTORY_STATES: tuple[State, ...] = ("succeeded", "cancelled")

# Pinned reasons: they appear verbatim in dead letters, signals, the admin and the docs.
MAX_ATTEMPTS_EXCEEDED = "max attempts exceeded"
#: A job that took its worker down CRASHES_TO_DEAD times (docs/reliability.md).
CRASHED_ITS_WORKER = "crashed its worker"
FAILED = "failed"
EXPIRED = "expired"


@dataclasses.dataclass(frozen=True)
class Progress:
    """What a running job last reported with `job.progress(done, total, note)`."""

    done: float
    total: float | None
    note: str
    updated_at: datetime

    def fraction(self) -> float | None:
        """done / total between 0 and 1; None without a total."""
        if not self.total:
            return None
        return min(max(self.done / self.total, 0.0), 1.0)

    def stored(self) -> str:
        """The JSON text the live row's `progress` column holds (its time is a column too)."""
        return encode({"done": self.done, "total": self.total, "note": self.note},
                              max_bytes=4096)  # fmt: skip


def stored_progress(value: Any, at: datetime | None) -> Progress | None:
    """The Progress a live row holds (its `progress` and `progress_at`); None when none."""
    if value is None or at is None:
        return None
    if isinstance(value, str):
        value = decode(value)
    return Progress(value["done"], value.get("total"), value.get("note", ""), at)


@dataclasses.dataclass(frozen=True)
class Job:
    """One job, live or dead, as read from the database at one moment."""

    id: int
    queue: str
    payload: Any
    state: State
    priority: int
    attempts: int
    max_attempts: int
    backoff_base: float
    lease: float
    #: When the job is due; None while it waits (for its dependencies or a signal) with
    #: nothing yet to give it one (docs/workflows.md, docs/durable-steps.md).
    run_at: datetime | None
    enqueued_at: datetime
    expires_at: datetime | None
    unique_key: str | None
    claimed_by: str | None
    lease_expires_at: datetime | None
    last_error: str | None
    died_at: datetime | None = None
    claimed_at: datetime | None = None
    reason: str | None = None
    retention: float | None = None
    #: What the queue's key_concurrency and key_rate count by (docs/flow-control.md).
    concurrency_key: str | None = None
    #: What a running job last reported (job.progress(); docs/running-jobs.md); read by
    #: get_job for a claimed job, None otherwise.
    progress: Progress | None = None
    #: A job from the history (state "succeeded" or "cancelled"): when it finished, how long
    #: its last attempt's handler ran (seconds), its recorded output, and why none was
    #: recorded.
    finished_at: datetime | None = None
    duration: float | None = None
    output: Any = None
    output_error: str | None = None
    #: The W3C trace context of the span that enqueued it (tracing.py), as stored: a JSON
    #: object of its headers; None when nothing traced the enqueue.
    trace_context: str | None = None
    #: When a requeue last brought it back from the dead letters (None if never): its
    #: enqueued_at stays the first enqueue's.
    requeued_at: datetime | None = None


@dataclasses.dataclass(frozen=True)
class QueueStats:
    pending: int
    scheduled: int
    claimed: int
    dead: int
    #: Seconds the longest-waiting due job has waited past its run_at; 0.0 when none waits.
    oldest_pending_age: float
    #: Jobs waiting for their dependencies (docs/workflows.md); not counted as scheduled.
    waiting: int = 0


class JobKeys(NamedTuple):
    """The keys a new job is stamped with after its row is written: what key_concurrency
    and key_rate count by, and what the claim takes turns between (docs/fair-share.md)."""

    concurrency_key: str | None = None
    fair_key: str | None = None


NO_KEYS = JobKeys()


class Stamps(NamedTuple):
    """The options a new job is written with, resolved once for a whole enqueue call."""

    priority: int
    max_attempts: int
    backoff_base: float
    lease: float
    retention: float | None
    #: None: the jobs are written waiting (docs/workflows.md).
    run_at: datetime | None
    enqueued_at: datetime
    expires_at: datetime | None
    unique_key: str | None
    trace_context: str | None = None

    def new_job(self, job_id: int, queue: str, payload: Any, now: datetime) -> Job:
        """The Job a fresh row holds: built from what was written, without reading it back."""
        fields = self._fresh_fields(queue, now)
        fields["id"], fields["payload"] = job_id, payload
        return make_job(fields)

    def new_jobs(
        self, ids: Sequence[int], queue: str, texts: Sequence[str], now: datetime
    ) -> list[Job]:
        """new_job for each (id, payload text) of one enqueue_many: the rows differ only in
        id and payload, so the other fields are worked out once."""
        fields = self._fresh_fields(queue, now)
        return [
            make_job({**fields, "id": job_id, "payload": decode(text)})
            for job_id, text in zip(ids, texts, strict=True)
        ]

    def _fresh_fields(self, queue: str, now: datetime) -> dict[str, Any]:
        """Every field of a fresh row's Job but its id and payload."""
        return {
            "queue": queue, "state": live_state(False, self.run_at, now),
            "priority": self.priority, "attempts": 0, "max_attempts": self.max_attempts,
            "backoff_base": self.backoff_base, "lease": self.lease, "run_at": self.run_at,
            "enqueued_at": self.enqueued_at, "expires_at": self.expires_at,
            "unique_key": self.unique_key, "claimed_by": None, "lease_expires_at": None,
            "last_error": None, "died_at": None, "claimed_at": None, "reason": None,
            "retention": self.retention, "concurrency_key": None,
            "trace_context": self.trace_context, "requeued_at": None,
        }  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryEntry:
    """What a history row holds beyond the live row it comes from: how long to keep it, how
    long the handler ran, and its recorded output (JSON text) or the note that replaced it
    (history.entry_for makes one)."""

    keep: float
    duration: float | None = None
    output: str | None = None
    output_error: str | None = None


def make_job(fields: dict[str, Any]) -> Job:
    """The Job holding `fields`; the fields it leaves out keep their defaults."""
    return without_init(Job, _DEFAULTED | fields)


#: The fields of Job that have a default, so that a Job from make_job holds every field even
#: where its caller reads no column for it (a fresh row's progress, a live row's output).
_DEFAULTED = {
    field.name: field.default
    for field in dataclasses.fields(Job)
    if field.default is not dataclasses.MISSING
}

_FrozenT = TypeVar("_FrozenT")


def without_init(cls: type[_FrozenT], fields: dict[str, Any]) -> _FrozenT:  # noqa: UP047 (3.11)
    """An instance of the frozen dataclass `cls` whose __dict__ is `fields` (every field,
    nothing else), made without the frozen __init__: its object.__setattr__ per field costs
    4.2 us of a Job against 0.3 us here, paid for every enqueued and every claimed job, more
    than 10% of the bulk enqueue and the drain (docs/benchmarks.md, "The driver's hot
    path"). The project's one construction past a constructor (issue 49);
    tests/test_frozen_values.py fails if dataclasses stop keeping fields in __dict__."""
    value = object.__new__(cls)
    object.__setattr__(value, "__dict__", fields)
    return value


def live_state(claimed: bool, run_at: datetime | None, now: datetime) -> State:
    """A live row's state: a waiting job's row has no run_at until it is released."""
    if claimed:
        return "claimed"
    if run_at is None:
        return "waiting"
    return "pending" if run_at <= now else "scheduled"
