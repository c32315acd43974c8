"""Renews the leases of this worker's running jobs, all in one UPDATE, every lease/3, so a job
that runs longer than its lease is never reclaimed while its worker lives.

The same UPDATE writes the progress running jobs reported since (job.progress()), at most
once a second per job: while some is waiting, the keeper ticks at least once a second. A
renewal refused for a running job means its row is gone (cancelled, purged) or was taken
back: the keeper raises the job's cancel flag, which is how a worker without NOTIFY learns
of a cancel (docs/running-jobs.md)."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from .. import defaults
from ..jobs import Progress
from ..queues import heartbeat_handles
from ..running import CLAIM_LOST
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
        runs = dict(zip(handles, self.inflight.runs_of(handles), strict=True))
        reports: dict[Claim, Progress] = {}
        at = time.monotonic()
        for handle, run in runs.items():
            # Most jobs never report: skip their lock without taking it.
            report = None if run.progress is None else run.progress_due(at)
            if report is not None:
                reports[handle.claim] = report
        # Each job is renewed with its own lease, so the next tick comes within a third of
        # the shortest lease held (a job may carry a shorter lease than its queue's default),
        # and every second while a job reports progress (the first report wakes the keeper).
        self.interval = keeper_interval([h.job.lease for h in handles])
        if any(run.progress is not None for run in runs.values()):
            self.interval = min(self.interval, defaults.PROGRESS_EVERY)
        renewed = heartbeat_handles(handles, self.using, reports)
        for handle, run in runs.items():
            if handle.claim in renewed and handle.claim in reports:
                run.progress_written(reports[handle.claim])
            if (
                # A job awaiting its ack may be acked between our UPDATE and now: only a
                # job whose handler still runs has really lost its lease.
                handle.claim not in renewed
                and self.inflight.is_running(handle)
                and not self.inflight.in_transaction(handle)
            ):
                run.cancel(CLAIM_LOST)
                logger.warning(
                    "%s job %s: lease renewal refused (cancelled, or lease lost); its "
                    "result will be discarded",
                    handle.job.queue, handle.job.id, extra=job_fields(handle.job),
                )  # fmt: skip
        return renewed


def keeper_interval(leases: list[float], default: float = IDLE_INTERVAL) -> float:
    """A third of the shortest lease, so two renewals can fail before a lease lapses."""
    return max(min(leases) / 3, 0.05) if leases else default
