"""The ALKQUEUE setting: one dict, read through `get_settings()`, cached until it changes."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclasses.dataclass(frozen=True)
class AlkQueueSettings:
    #: Database alias that queues use when `using` is not given.
    DATABASE: str = "default"
    #: Largest payload accepted, in bytes of its compact UTF-8 JSON encoding.
    MAX_PAYLOAD_BYTES: int = 1024 * 1024
    #: Extra modules imported at start-up to register @consumer handlers.
    CONSUMER_MODULES: tuple[str, ...] = ()
    #: Seconds between two reclaims of lapsed leases (leader only).
    RECLAIM_INTERVAL: float = 5.0
    #: Seconds between two sweeps of expired jobs and old dead letters (leader only).
    SWEEP_INTERVAL: float = 60.0
    #: Seconds between two refreshes of a worker's registry row.
    WORKER_HEARTBEAT_INTERVAL: float = 5.0
    #: A worker whose row was not refreshed for this many seconds is shown as stale.
    WORKER_STALE_AFTER: float = 30.0
    #: Stale worker rows are deleted after this many seconds.
    WORKER_PRUNE_AFTER: float = 86400.0
    #: Seconds an ack waits to be grouped with others into one commit (0 = ack at once).
    ACK_WINDOW: float = 0.002
    #: Periodic jobs: name -> {"cron", "queue", "task" + "args"/"kwargs" | "payload"}.
    PERIODIC: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: Seconds between two scheduler passes over PERIODIC (leader only).
    SCHEDULE_INTERVAL: float = 1.0
    #: Prepare the hot statements (enqueue, claim, ack, heartbeat) on PostgreSQL, once per
    #: connection. Switch off behind a pooler that cannot keep prepared statements (PgBouncer
    #: older than 1.21 in transaction mode).
    PREPARED_STATEMENTS: bool = True
    #: The leader VACUUMs the live table when PostgreSQL counts more dead row versions than
    #: this (checked every RECLAIM_INTERVAL): the backstop for an autovacuum that falls behind
    #: a queue's churn. None: never.
    VACUUM_DEAD_TUPLES: int | None = 50_000
    #: Seconds after an enqueue's wake-up NOTIFY during which further enqueues of the same
    #: queue, outside a transaction and on the same connection, send none; workers look again
    #: once the window (plus 50 ms) has passed after each NOTIFY. 0: every enqueue notifies.
    #: PostgreSQL only (sql/wake_pacing.py).
    NOTIFY_WINDOW: float = 0.005
    #: Database alias used for LISTEN (a direct connection when claims go through PgBouncer).
    LISTEN_DATABASE: str | None = None
    #: Seconds of per-minute queue statistics (QueueStat, the admin charts) kept; the leader's
    #: stats loop deletes older minutes. Default 7 days.
    STATS_RETENTION: float = 7 * 86400.0
    #: Per-queue options for queues without a @consumer (the Django Tasks backend's):
    #: name -> {"sensitive": bool}.
    QUEUES: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


_FIELDS = {f.name for f in dataclasses.fields(AlkQueueSettings)}


@functools.cache
def get_settings() -> AlkQueueSettings:
    user: dict[str, Any] = dict(getattr(django_settings, "ALKQUEUE", {}) or {})
    unknown = sorted(set(user) - _FIELDS)
    if unknown:
        raise ImproperlyConfigured(
            f"Unknown ALKQUEUE setting(s) {', '.join(unknown)}; "
            f"valid keys are {', '.join(sorted(_FIELDS))}."
        )
    if "CONSUMER_MODULES" in user:
        user["CONSUMER_MODULES"] = tuple(user["CONSUMER_MODULES"])
    return AlkQueueSettings(**user)


@receiver(setting_changed)
def _reset_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "ALKQUEUE":
        get_settings.cache_clear()
