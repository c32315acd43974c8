"""Helpers for testing a project's own handlers (docs/testing.md), and a pytest plugin.

`drain()` runs due jobs in the test's own thread through the worker's real claim and outcome
rules (ack, retry, fail, dead letter; batch and atomic consumers; the Tasks backend's
queues), so a test sees what a worker would have done. `jobs()` lists what was enqueued;
`run_job()` runs one job now, due or not. `ALKQUEUE["RUN_ON_COMMIT"] = True` (tests only)
runs each due job a transaction enqueued when it commits.

The pytest plugin (registered through the `pytest11` entry point) gives the fixture
`alkqueue`, an object with these three functions and `run_on_commit()`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F

from . import hooks
from .clock import system_clock
from .conf import get_settings
from .exceptions import InvalidOption
from .jobs import Job
from .worker.exits import StartupRefused

#: The worker id that drain() and run_job() claim under, shown in the admin while they run.
WORKER_ID = "django_alkqueue.testing"
OUTCOMES = ("succeeded", "retried", "snoozed", "dead", "lost", "cancelled")
#: drain() stops after this many jobs unless told otherwise: a handler that enqueues a job
#: for itself would otherwise loop for ever.
MAX_JOBS = 10_000


@dataclasses.dataclass(frozen=True)
class Drained:
    """What `drain()` did: jobs per outcome ("succeeded", "retried", "snoozed", "dead",
    "lost", "cancelled")."""

    succeeded: int = 0
    retried: int = 0
    snoozed: int = 0
    dead: int = 0
    lost: int = 0
    cancelled: int = 0

    @property
    def total(self) -> int:
        return (
            self.succeeded + self.retried + self.snoozed + self.dead + self.lost + (self.cancelled)
        )


def jobs(queue_name: str, *, using: str | None = None) -> list[Job]:
    """The live jobs of a queue in handout order (priority, run_at, id), any state; within a
    priority the waiting ones (no run_at yet) last, on every database."""
    # App registry: pytest loads this plugin before Django is set up; these import the models.
    from .models import QueueMessage
    from .queues import queue

    alias = using or get_settings().DATABASE
    ids = (
        QueueMessage.objects.using(alias)
        .filter(queue=queue_name)
        .order_by("-priority", F("run_at").asc(nulls_last=True), "id")
        .values_list("id", flat=True)
    )
    q = queue(queue_name, using=alias)
    found = [q.get_job(job_id) for job_id in ids]
    return [job for job in found if job is not None]


def drain(
    queue_name: str | Sequence[str] | None = None,
    *,
    using: str | None = None,
    max_jobs: int = MAX_JOBS,
) -> Drained:
    """Run due jobs of the queue(s) (default: every served queue) until none is due, as one
    worker with one thread would: claims of the consumer's batch size, its outcome rules.
    Jobs the handlers enqueue are run too when due. Returns counts per outcome."""
    names = (queue_name,) if isinstance(queue_name, str) else tuple(queue_name or ())
    runner = _Runner(names, using or get_settings().DATABASE)
    try:
        while runner.ran < max_jobs:
            if not any(runner.run_claim(name, max_jobs - runner.ran) for name in runner.names):
                break
    finally:
        runner.executor.close()
    return runner.drained()


def run_job(job: Job | int, *, using: str | None = None) -> Drained:
    """Run one live, unclaimed job now, due or not, through the outcome rules. Raises
    InvalidOption when there is no such job or another claim holds it."""
    # App registry: pytest loads this plugin before Django is set up; these import the models.
    from . import operations
    from .models import QueueMessage

    alias = using or get_settings().DATABASE
    job_id = job if isinstance(job, int) else job.id
    row = QueueMessage.objects.using(alias).filter(id=job_id).values("queue", "claim_token")
    found = row.first()
    if found is None:
        raise InvalidOption(f"no live job {job_id} to run")
    if found["claim_token"] is not None:
        raise InvalidOption(f"job {job_id} is claimed by a worker")
    operations.run_now(alias, [job_id], system_clock())
    runner = _Runner((found["queue"],), alias)
    try:
        runner.run_one(found["queue"], job_id)
    finally:
        runner.executor.close()
    return runner.drained()


def run_on_commit(enqueued: Sequence[Job], using: str) -> None:
    """Queue.enqueue's hook when RUN_ON_COMMIT is on: run the due ones after commit."""
    due = [job.id for job in enqueued if job.state == "pending"]
    if due:
        transaction.on_commit(lambda: _run_each(due, using), using=using)


def _run_each(job_ids: list[int], using: str) -> None:
    for job_id in job_ids:
        # Already run, cancelled or claimed by a worker since the enqueue: nothing to do.
        with suppress(InvalidOption):
            run_job(job_id, using=using)


hooks.register_run_on_commit(run_on_commit)


class _Runner:
    """The worker's executor and acker, run in the calling thread."""

    def __init__(self, names: tuple[str, ...], using: str) -> None:
        # App registry: pytest loads this plugin before Django is set up; these import the models.
        from .queues import queue
        from .reports.worker_stats import WorkerStats
        from .worker.acker import AckService
        from .worker.executor import Executor
        from .worker.inflight import InFlight
        from .worker.served import resolve_specs

        try:
            specs = resolve_specs(names)
        except StartupRefused as exc:
            raise InvalidOption(str(exc)) from None
        self.specs = {spec.queue: spec for spec in specs}
        self.names = list(self.specs)
        self.using = using
        self.inflight = InFlight()
        self.stats = WorkerStats()
        self.acker = AckService(using, self.inflight, self.stats, window=0)
        self.executor = Executor(self.specs, self.acker, self.inflight, self.stats, using)
        # A test's own transaction (a TestCase, pytest-django's django_db) holds every
        # write: job.step records within it rather than refuse (docs/durable-steps.md).
        self.executor.steps_in_transaction = connections[using].in_atomic_block
        self.ran = 0
        self.queue = queue

    def run_claim(self, name: str, room: int) -> bool:
        """Claim and run one claim's worth of the queue's due jobs; False when none was due."""
        spec = self.specs[name]
        handles = self.queue(name, using=self.using).claim(WORKER_ID, min(spec.batch or 1, room))
        if not handles:
            return False
        self._run(handles)
        return True

    def run_one(self, name: str, job_id: int) -> None:
        """Run job `job_id`: claim the queue's due jobs up to it, release the others."""
        q = self.queue(name, using=self.using)
        handles = q.claim(WORKER_ID, q.depth_pending() or 1)
        ours = [h for h in handles if h.job.id == job_id]
        for other in handles:
            if other.job.id != job_id:
                other.release()
        if not ours:
            raise InvalidOption(f"job {job_id} could not be claimed (held back or gone)")
        self._run(ours)

    def _run(self, handles: list[Any]) -> None:
        self.inflight.add_all(handles)
        self.executor.run_unit(handles)
        while self.acker.pending():
            self.acker.flush()
        self.ran += len(handles)

    def drained(self) -> Drained:
        totals: Counter[str] = self.stats.totals()
        return Drained(**{outcome: totals[outcome] for outcome in OUTCOMES})


# The fixture only when pytest loads this module as its plugin (pytest is imported then): the
# app's ready() imports this module for its hook, and a web process need not import pytest,
# nor django.test.
if "pytest" in sys.modules:
    import pytest
    from django.test import override_settings

    class Helpers:
        """The `alkqueue` fixture: the module's functions, bound to nothing but the settings."""

        drain = staticmethod(drain)
        jobs = staticmethod(jobs)
        run_job = staticmethod(run_job)

        @staticmethod
        @contextmanager
        def run_on_commit() -> Iterator[None]:
            """Within the block, a committed enqueue runs its due jobs at once."""
            current = dict(getattr(settings, "ALKQUEUE", None) or {})
            with override_settings(ALKQUEUE={**current, "RUN_ON_COMMIT": True}):
                yield

    @pytest.fixture
    def alkqueue() -> Helpers:
        """drain(), jobs(), run_job() and run_on_commit() for a test (docs/testing.md)."""
        return Helpers()
