"""Writes the consumer registry to the Consumer table when a worker starts.

The table is unique on queue, so across deployments whose code disagrees the database is the
last line of defence: a worker refuses a queue whose row names another handler, unless it
was started with --takeover.
"""

from __future__ import annotations

from datetime import datetime

from ..clock import system_clock
from ..consumers import ConsumerSpec
from ..models import Consumer
from ..privacy import spec_is_sensitive
from ..queues import DEFAULT_LEASE, DEFAULT_MAX_ATTEMPTS
from .exits import StartupRefused


def sync_consumers(
    specs: list[ConsumerSpec], using: str, takeover: bool, now: datetime | None = None
) -> None:
    """Write each consumer's row. `now` (default: the system clock) stamps updated_at on a
    re-sync: an UPDATE leaves auto_now fields alone."""
    stamp = now or system_clock()
    for spec in specs:
        settings = {
            "handler": spec.path,
            "lease": spec.lease if spec.lease is not None else DEFAULT_LEASE,
            "max_attempts": spec.max_attempts
            if spec.max_attempts is not None
            else DEFAULT_MAX_ATTEMPTS,
            "retry_policy": spec.retry.as_dict(),
            # The code's limits, for processes without this code (the admin's): the
            # operator's overrides, in limit_overrides, are never touched here.
            "code_limits": spec.limits.stored(),
            # Likewise whether its payloads are personal data: the admin masks them by it.
            "sensitive": spec_is_sensitive(spec),
        }
        # get_or_create re-reads after losing an insert race, so workers starting together
        # all carry on with the one row.
        row, created = Consumer.objects.using(using).get_or_create(
            queue=spec.queue, defaults=settings
        )
        if created:
            continue
        if row.handler != spec.path and not takeover:
            raise StartupRefused(
                f"queue {spec.queue!r} belongs to {row.handler} in the Consumer table, but this "
                f"worker's consumer is {spec.path}; refusing to start (use --takeover to "
                "replace it)"
            )
        # update() touches only the named columns (never the paused flag an operator set).
        Consumer.objects.using(using).filter(pk=row.pk).update(**settings, updated_at=stamp)
