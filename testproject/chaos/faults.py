"""Faults the chaos suite injects inside a worker process (installed by ChaosConfig.ready()
from environment variables that only the suite's worker subprocesses carry)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured


def stop_lease_keeper_for(queues: set[str]) -> None:
    """The worker's lease keeper stops renewing the leases of jobs on `queues`: a handler that
    blocks there outlives its lease, as if the keeper had died. Other queues are unaffected."""
    from django_alkqueue.queues import JobHandle
    from django_alkqueue.worker import heartbeats

    renew = getattr(heartbeats, "heartbeat_handles", None)
    if renew is None:  # the keeper changed shape: fail loudly rather than inject nothing
        raise ImproperlyConfigured("chaos: heartbeats.heartbeat_handles is gone; update faults.py")

    def renew_others(
        handles: Sequence[JobHandle], using: str, progress: Mapping[Any, Any] | None = None
    ) -> set[Any]:
        return renew([h for h in handles if h.job.queue not in queues], using, progress)

    heartbeats.heartbeat_handles = renew_others
