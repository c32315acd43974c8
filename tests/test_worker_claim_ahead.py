"""Claim ahead does not hoard long jobs (issue 39, "Fast by default"): two workers with the
default options, 20 jobs of 2 s each, and no worker holds a claimed job it has not started
for more than 1 s while the other has a free thread. Measured from the times the handlers
record (tests/running_consumers.py, "two-seconds"): claimed, started, ended."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from django_alkqueue import queue
from django_alkqueue.defaults import WORKER_CONCURRENCY
from testproject.shop.models import HandlerRun
from tests.conftest import RUNNING_CONSUMERS, wait_until
from tests.workers import Watched, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

#: The most a job may wait in one worker, unstarted, while another has a free thread.
HOLD_LIMIT = 1.0


@dataclass(frozen=True)
class Run:
    worker: str
    claimed: float
    started: float
    ended: float


def runs_of(queue_name: str) -> list[Run]:
    """Each job's run, from its handler's two records."""
    notes: dict[int, dict[str, str]] = {}
    for row in HandlerRun.objects.filter(queue=queue_name):
        fields = dict(part.split("=") for part in row.note.split())
        notes.setdefault(row.job_id, {"worker": row.worker}).update(fields)
    return [Run(n["worker"], float(n["claimed"]), float(n["started"]), float(n["ended"]))
            for n in notes.values()]  # fmt: skip


def free_thread_at(runs: list[Run], worker: str, at: float) -> bool:
    """Whether `worker` was up at `at` (from its first claim to its last end) with fewer
    jobs running than its threads."""
    own = [r for r in runs if r.worker == worker]
    if not own or not min(r.claimed for r in own) <= at <= max(r.ended for r in own):
        return False
    return sum(r.started <= at < r.ended for r in own) < WORKER_CONCURRENCY


def hoarded(runs: list[Run]) -> list[Run]:
    """The runs that waited unstarted past HOLD_LIMIT in their worker while another worker
    had a free thread (checked where that can change: the hold's limit and each job end)."""
    found = []
    for run in runs:
        since = run.claimed + HOLD_LIMIT
        moments = [since] + [r.ended for r in runs if since < r.ended < run.started]
        others = {r.worker for r in runs} - {run.worker}
        if run.started > since and any(
            free_thread_at(runs, other, at) for other in others for at in moments
        ):
            found.append(run)
    return found


def test_the_hoarding_check_finds_a_job_held_while_the_other_worker_idles():
    runs = [Run("a", 0.0, 0.0, 5.0), Run("a", 0.0, 3.0, 5.0), Run("b", 0.0, 0.0, 10.0)]

    assert hoarded(runs) == [Run("a", 0.0, 3.0, 5.0)]


def test_the_hoarding_check_allows_a_wait_while_every_other_thread_is_busy():
    busy = [Run("b", 0.0, 0.0, 10.0) for _ in range(WORKER_CONCURRENCY)]

    assert hoarded([Run("a", 0.0, 3.0, 5.0), *busy]) == []


def test_two_default_workers_never_hold_a_long_job_unstarted_while_the_other_has_a_free_thread(
    running_consumers,
):
    jobs = queue("two-seconds").enqueue_many([{"seconds": 2}] * 20)
    workers = [Watched(start_worker("--queue", "two-seconds", env=RUNNING_CONSUMERS))
               for _ in range(2)]  # fmt: skip
    try:
        wait_until(lambda: HandlerRun.objects.filter(note__startswith="ended").count() == 20,
                   timeout=120, what="all 20 jobs ran")  # fmt: skip
    finally:
        for worker in workers:
            stop(worker.process, timeout=60)
    outputs = "".join(w.output for w in workers)

    runs = runs_of("two-seconds")
    assert len(runs) == len(jobs)
    assert len({r.worker for r in runs}) == 2, outputs  # both took part
    assert hoarded(runs) == [], outputs
