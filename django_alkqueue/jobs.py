"""The value objects handed to callers: `Job` and `QueueStats`. Frozen; built from rows."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, Literal

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


@dataclasses.dataclass(frozen=True)
class QueueStats:
    pending: int
    scheduled: int
    claimed: int
    dead: int
    #: Seconds the longest-waiting due job has waited past its run_at; 0.0 when none waits.
    oldest_pending_age: float


def live_state(claimed: bool, run_at: datetime, now: datetime) -> State:
    if claimed:
        return "claimed"
    return "pending" if run_at <= now else "scheduled"
