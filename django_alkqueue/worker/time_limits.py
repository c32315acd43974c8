"""Consumers' time limits in the thread pool (docs/running-jobs.md).

A handler past its `timeout` cannot be stopped: Python has no way to end a thread. So, at
the deadline, this service
1. raises the job's cancel flag (the handler may see `job.cancelled` and return early), and
   the heartbeat service stops heartbeating its lease;
2. fails the attempt with TimeLimitExceeded through the retry policy, as if the handler had
   raised it (retry or dead letter); a later ack from the handler is refused by the claim
   token, since the retry gave the job up;
3. writes the thread off: a new one takes its place, so it no longer counts as capacity.
A thread still in its handler STUCK_GRACE seconds after its deadline is *stuck*. Once more
than `max_stuck` are, the worker recycles itself (`on_stuck`): it finishes its other jobs,
releases what it holds and exits with EXIT_STUCK, for its supervisor to start a fresh one.

An atomic handler's row is locked by its own transaction until the handler returns: its
attempt is settled then (rolled back, TimeLimitExceeded), not here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from .. import defaults
from ..queues import JobHandle
from ..reports.worker_report import job_fields
from ..running import Run
from .inflight import InFlight
from .pool import ThreadPool

logger = logging.getLogger("django_alkqueue")

#: How often the deadlines are checked: a time limit is enforced this late at most.
INTERVAL = 0.2


class TimeLimitService:
    """The service that fails the attempts of handlers past their time limit, and recycles
    the worker once too many threads are stuck."""

    name = "alk-time-limits"
    interval = INTERVAL

    def __init__(
        self,
        inflight: InFlight,
        pool: ThreadPool,
        settle: Callable[[JobHandle, Run], None],
        on_stuck: Callable[[int], None],
        max_stuck: int = defaults.WORKER_MAX_STUCK,
        grace: float = defaults.STUCK_GRACE,
    ) -> None:
        self.inflight = inflight
        self.pool = pool
        #: Fails an overrun attempt through the retry policy (Executor.settle_overrun).
        self.settle = settle
        #: Called once, with the number of stuck threads, when it passes max_stuck.
        self.on_stuck = on_stuck
        self.max_stuck = max_stuck
        self.grace = grace
        self.recycling = False

    def run_once(self, now: datetime) -> int:
        """Settle the jobs that passed their deadline; returns how many did."""
        overran = 0
        for handle, run in self.inflight.runs():
            if run.time_out(now):
                overran += 1
                self._overran(handle, run)
        stuck = self.pool.stuck()
        if stuck > self.max_stuck and not self.recycling:
            self.recycling = True
            logger.error("%d handler threads are stuck past their time limit (--max-stuck "
                         "%d): recycling the worker", stuck, self.max_stuck)  # fmt: skip
            self.on_stuck(stuck)
        return overran

    def _overran(self, handle: JobHandle, run: Run) -> None:
        job = handle.job
        logger.warning("%s job %s: ran longer than its time limit (%g s); the attempt fails",
                       job.queue, job.id, run.timeout or 0, extra=job_fields(job))  # fmt: skip
        self.pool.write_off(handle, time.monotonic() + self.grace)
        if not self.inflight.in_transaction(handle) and run.settle():
            self.settle(handle, run)
