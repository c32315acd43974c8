"""The value objects handed to callers: `Job` and `QueueStats`. Frozen; built from rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple

from .payload import decode

State = Literal["pending", "scheduled", "claimed", "dead"]
LIVE_STATES: tuple[State, ...] = ("pending", "scheduled", "claimed")
STATES: tuple[State, ...] = (*LIVE_STATES, "dead")

# Pinned reasons: they appear verbatim in dead letters, signals, the admin and the docs.
MAX_ATTEMPTS_EXCEEDED = "max attempts exceeded"
FAILED = "failed"
EXPIRED = "expired"


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
    run_at: datetime
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


@dataclasses.dataclass(frozen=True)
class QueueStats:
    pending: int
    scheduled: int
    claimed: int
    dead: int
    #: Seconds the longest-waiting due job has waited past its run_at; 0.0 when none waits.
    oldest_pending_age: float


class Stamps(NamedTuple):
    """The options a new job is written with, resolved once for a whole enqueue call."""

    priority: int
    max_attempts: int
    backoff_base: float
    lease: float
    retention: float | None
    run_at: datetime
    enqueued_at: datetime
    expires_at: datetime | None
    unique_key: str | None

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
        }  # fmt: skip


def make_job(fields: dict[str, Any]) -> Job:
    """A Job holding exactly `fields` (every field of Job), made without the frozen
    constructor's one object.__setattr__ per field, which is most of the Python cost of a new
    job, paid once per enqueued row and once per claimed one (docs/benchmarks.md)."""
    job = object.__new__(Job)
    object.__setattr__(job, "__dict__", fields)
    return job


def live_state(claimed: bool, run_at: datetime, now: datetime) -> State:
    if claimed:
        return "claimed"
    return "pending" if run_at <= now else "scheduled"
