"""Heartbeats: extends the leases of this worker's running jobs, all in one UPDATE, every
lease/3, so a job that runs longer than its lease is never reclaimed while its worker lives.

The same UPDATE writes the progress running jobs reported since (job.progress()), at most
once a second per job: while some is waiting, the service ticks at least once a second. A
heartbeat refused for a running job means its row is gone (cancelled, purged) or was taken
back: the service raises the job's cancel flag, which is how a worker without NOTIFY learns
of a cancel (docs/running-jobs.md). A heartbeat skips the rows other transactions hold; such
a row is read again without locks, and counts as refused only when it lost the claim."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.db import DatabaseError, InterfaceError

from .. import defaults
from ..jobs import Progress
from ..queues import JobHandle, heartbeat_handles, held_claims
from ..reports.worker_report import job_fields
from ..running import CLAIM_LOST, Run
from ..sql import Claim
from .inflight import InFlight

logger = logging.getLogger("django_alkqueue")


#: How often an idle service looks for newly claimed jobs. An idle tick runs no query, and a
#: job must not wait long for its first heartbeat: its lease may be shorter than its queue's.
IDLE_INTERVAL = 0.25


class HeartbeatService:
    """The service that heartbeats the leases of the jobs this worker holds."""

    name = "alk-heartbeat"

    def __init__(self, inflight: InFlight, using: str, interval: float = IDLE_INTERVAL) -> None:
        self.inflight = inflight
        self.using = using
        self.interval = interval

    def run_once(self, now: datetime) -> set[Claim]:
        """Heartbeat every lease held outside an atomic block; returns the claims whose lease
        was extended. Refusals are logged: those jobs' results will be discarded, since their
        ack will be refused too."""
        handles = self.inflight.to_heartbeat()
        runs = dict(zip(handles, self.inflight.runs_of(handles), strict=True))
        reports: dict[Claim, Progress] = {}
        at = time.monotonic()
        for handle, run in runs.items():
            # Most jobs never report: skip their lock without taking it.
            report = None if run.progress is None else run.progress_due(at)
            if report is not None:
                reports[handle.claim] = report
        # Each heartbeat extends a job's lease by its own length, so the next tick comes within
        # a third of the shortest lease held (a job may carry a shorter lease than its queue's
        # default), and every second while a job reports progress (the first report wakes
        # the service).
        self.interval = heartbeat_interval([h.job.lease for h in handles])
        if any(run.progress is not None for run in runs.values()):
            self.interval = min(self.interval, defaults.PROGRESS_EVERY)
        extended = self._heartbeat(handles, reports)
        for handle, run in runs.items():
            if handle.claim in extended and handle.claim in reports:
                run.progress_written(reports[handle.claim])
        refused = [h for h in handles if h.claim not in extended and self._running(h)]
        if refused:
            self._cancel_lost(refused, runs)
        return extended

    def _heartbeat(self, handles: list[JobHandle], reports: dict[Claim, Progress]) -> set[Claim]:
        """heartbeat_handles(). A database error is the loop's to back off from; any other
        error (a progress report the heartbeat cannot write) must not stop this loop, which
        every running job's lease depends on: the leases are extended again without the
        progress, whose reports are dropped, and the error is logged."""
        try:
            return heartbeat_handles(handles, self.using, reports)
        except (DatabaseError, InterfaceError):
            raise
        except Exception as exc:
            if not reports:
                raise
            logger.error("heartbeat with progress failed (%s: %s); heartbeating without the "
                         "progress of jobs %s", type(exc).__name__, exc,
                         sorted(claim.id for claim in reports))  # fmt: skip
            for handle, run in zip(handles, self.inflight.runs_of(handles), strict=True):
                if handle.claim in reports:
                    run.progress_written(reports[handle.claim])
            reports.clear()
            return heartbeat_handles(handles, self.using, None)

    def _running(self, handle: JobHandle) -> bool:
        """A job awaiting its ack may be acked between our UPDATE and now: only a job whose
        handler still runs (outside an atomic block) can lose its lease."""
        return self.inflight.is_running(handle) and not self.inflight.in_transaction(handle)

    def _cancel_lost(self, refused: list[JobHandle], runs: dict[JobHandle, Run]) -> None:
        """Raise the cancel flag of the refused jobs whose claim is gone. A heartbeat skips the
        rows other transactions hold (the job's own retry on its way, an admin's change):
        those rows, read as last committed, still carry the claim, and the next tick extends
        their lease."""
        held = held_claims(refused, self.using)
        for handle in refused:
            # Asked again after the read: a handler that settled its job meanwhile is done.
            if handle.claim in held or not self._running(handle):
                continue
            runs[handle].cancel(CLAIM_LOST)
            logger.warning(
                "%s job %s: heartbeat refused (cancelled, or lease lost); its "
                "result will be discarded",
                handle.job.queue, handle.job.id, extra=job_fields(handle.job),
            )  # fmt: skip


def heartbeat_interval(leases: list[float], default: float = IDLE_INTERVAL) -> float:
    """A third of the shortest lease, so two heartbeats can fail before a lease lapses."""
    return max(min(leases) / 3, 0.05) if leases else default
