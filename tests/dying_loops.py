"""Makes one loop of a worker subprocess die, for tests/test_worker_dying_loops.py.

The test starts `alk_worker` with ALKQUEUE_EXTRA_CONSUMERS=tests.dying_loops (so the worker
imports this module as a consumer module) and ALKQUEUE_TEST_DYING_LOOP naming the loop. That
loop's service then raises on its first tick that has work to do, as a bug would: an
exception that is not a database error escapes its loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django_alkqueue.reports.worker_report import StatusReportService
from django_alkqueue.worker.acker import AckService
from django_alkqueue.worker.claimer import ClaimService
from django_alkqueue.worker.heartbeats import HeartbeatService
from django_alkqueue.worker.listener import ListenService
from django_alkqueue.worker.maintenance import ReclaimService
from django_alkqueue.worker.presence import PresenceService
from django_alkqueue.worker.queue_stats import QueueStatDeltaService


class MadeToDie(RuntimeError):
    pass


def _always(service: Any) -> bool:
    return True


#: loop -> (the service class whose tick raises, when it raises). The leader's loop dies
#: through one of its services, as a bug in any of them would kill it.
LOOPS: dict[str, tuple[type, Callable[[Any], bool]]] = {
    "alk-claim": (ClaimService, _always),
    "alk-acker": (AckService, lambda acker: acker.pending() > 0),
    "alk-heartbeat": (HeartbeatService, lambda service: bool(service.inflight.to_heartbeat())),
    "alk-presence": (PresenceService, _always),
    "alk-leader": (ReclaimService, _always),
    "alk-queue-stat-deltas": (QueueStatDeltaService, _always),
    "alk-status": (StatusReportService, _always),
    "alk-listener": (ListenService, _always),
}


def _dying(original: Callable[[Any, datetime], object], when: Callable[[Any], bool]) -> Any:
    def run_once(self: Any, now: datetime) -> object:
        if when(self):
            raise MadeToDie(f"{type(self).__name__} made to die by tests/dying_loops.py")
        return original(self, now)

    return run_once


_chosen = os.environ.get("ALKQUEUE_TEST_DYING_LOOP")
if _chosen:
    _service, _when = LOOPS[_chosen]
    _service.run_once = _dying(_service.run_once, _when)  # type: ignore[attr-defined]
