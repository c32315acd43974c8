"""Faults the chaos suite injects inside a worker process (installed by ChaosConfig.ready()
from environment variables that only the suite's worker subprocesses carry)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured


def stop_heartbeats_for(queues: set[str]) -> None:
    """The worker stops heartbeating the leases of jobs on `queues`: a handler that blocks
    there outlives its lease, as if the heartbeat service had died. Other queues are
    unaffected."""
    from django_alkqueue.queues import JobHandle
    from django_alkqueue.worker import heartbeats

    heartbeat = getattr(heartbeats, "heartbeat_handles", None)
    if heartbeat is None:  # the service changed shape: fail loudly rather than inject nothing
        raise ImproperlyConfigured("chaos: heartbeats.heartbeat_handles is gone; update faults.py")

    def heartbeat_others(
        handles: Sequence[JobHandle], using: str, progress: Mapping[Any, Any] | None = None
    ) -> set[Any]:
        return heartbeat([h for h in handles if h.job.queue not in queues], using, progress)

    heartbeats.heartbeat_handles = heartbeat_others
