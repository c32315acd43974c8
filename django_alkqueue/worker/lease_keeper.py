"""Renews the leases of this worker's running jobs, all in one UPDATE, every lease/3, so a job
that runs longer than its lease is never reclaimed while its worker lives."""

from __future__ import annotations

import logging
from datetime import datetime

from ..queues import heartbeat_handles
from ..sql import Claim
from .inflight import InFlight
from .report import job_fields

logger = logging.getLogger("django_alkqueue")


#: How often an idle keeper looks for newly claimed jobs. An idle tick runs no query, and a
#: job must not wait long for its first renewal: its lease may be shorter than its queue's.
IDLE_INTERVAL = 0.25


class LeaseKeeper:
    """The service that heartbeats the leases of the jobs this worker holds."""

    name = "alk-lease-keeper"

    def __init__(self, inflight: InFlight, using: str, interval: float = IDLE_INTERVAL) -> None:
        self.inflight = inflight
        self.using = using
        self.interval = interval

    def run_once(self, now: datetime) -> set[Claim]:
        """Renew every renewable lease; returns the claims renewed. Refusals are logged: those
        jobs' results will be discarded, since their ack will be refused too."""
        handles = self.inflight.renewable()
        # Each job is renewed with its own lease, so the next tick comes within a third of
        # the shortest lease held (a job may carry a shorter lease than its queue's default).
        self.interval = keeper_interval([h.job.lease for h in handles])
        renewed = heartbeat_handles(handles, self.using)
        for handle in handles:
            if (
                # A job awaiting its ack may be acked between our UPDATE and now: only a
                # job whose handler still runs has really lost its lease.
                handle.claim not in renewed
                and self.inflight.is_running(handle)
                and not self.inflight.in_transaction(handle)
            ):
                logger.warning(
                    "%s job %s: lease renewal refused (lease lost); its result will be discarded",
                    handle.job.queue, handle.job.id, extra=job_fields(handle.job),
                )  # fmt: skip
        return renewed


def keeper_interval(leases: list[float], default: float = IDLE_INTERVAL) -> float:
    """A third of the shortest lease, so two renewals can fail before a lease lapses."""
    return max(min(leases) / 3, 0.05) if leases else default
