"""Scenario 2, worker crash: three workers drain a queue while one of them, chosen at random,
is SIGKILLed every few seconds and started again. Every job completes (none runs out of its
six attempts); a job runs more than once only where a kill took down the worker holding it."""

from __future__ import annotations

import random
import time

import pytest
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage, Worker

from .harness import ChaosWorker, Fleet, riding_out, serving, wait_for
from .invariants import Fault, check
from .record import Stopwatch, record
from .scale import pick

pytestmark = [pytest.mark.row_locks, pytest.mark.django_db(transaction=True)]

QUEUE = "chaos-crash"  # lease 2 s, 6 attempts, no backoff
JOBS = pick(short=400, long=5_000)
WORKERS, THREADS = 3, 4
HANDLER_MS = (10, 150)
KILL_EVERY = pick(short=1.5, long=3.0)
MIN_KILLS = pick(short=3, long=10)
SEED = 2


def registered(worker: ChaosWorker) -> bool:
    return not worker.alive() or Worker.objects.filter(worker_id=worker.worker_id).exists()


def test_sigkilled_workers_lose_no_job_and_duplicate_only_the_jobs_they_held(fleet: Fleet):
    rng = random.Random(SEED)
    jobs = queue(QUEUE).enqueue_many(
        [{"i": i, "ms": round(rng.uniform(*HANDLER_MS), 1)} for i in range(JOBS)]
    )
    generations = [0] * WORKERS

    def launch(slot: int) -> ChaosWorker:
        generations[slot] += 1
        worker_id = f"crash-{slot}.{generations[slot]}"
        return fleet.start(*serving(QUEUE, threads=THREADS), worker_id=worker_id)

    def remaining() -> int:
        return riding_out(lambda: QueueMessage.objects.filter(queue=QUEUE).count())

    clock = Stopwatch()
    running = [launch(slot) for slot in range(WORKERS)]
    faults: list[Fault] = []
    deadline = time.monotonic() + pick(120, 900)
    while remaining() and time.monotonic() < deadline:
        time.sleep(KILL_EVERY)
        if not remaining():
            break
        slot = rng.randrange(WORKERS)
        victim = running[slot]
        killed_at = timezone.now()
        victim.kill()
        faults.append(
            Fault("worker SIGKILL", killed_at, timezone.now(), frozenset({victim.worker_id or ""}))
        )
        running[slot] = launch(slot)
    wait_for(lambda: remaining() == 0, timeout=60, what=f"drain of {JOBS} jobs")
    drained_in = clock.seconds()
    # A worker launched just before the drain ended may still be starting up, before its
    # SIGTERM handler is in place (it is once its Worker row exists).
    wait_for(lambda: all(registered(w) for w in running), timeout=60, what="workers started")
    codes = fleet.stop_all()

    report = check(
        [j.id for j in jobs], faults, expect=dict.fromkeys((j.id for j in jobs), "acked")
    )
    record(
        2,
        "Worker crash",
        f"{WORKERS} workers x {THREADS} threads drain {JOBS:,} jobs of {HANDLER_MS[0]}-"
        f"{HANDLER_MS[1]} ms (lease 2 s); one worker SIGKILLed every {KILL_EVERY:g} s and "
        "restarted",
        report,
        clock.seconds(),
        {"kills": len(faults), "drain_seconds": drained_in},
    )
    assert report.ok, report.summary() + fleet.outputs()
    assert len(faults) >= MIN_KILLS, f"only {len(faults)} kills: the drain was too quick"
    assert report.figures.duplicates > 0, "no kill landed on a running job"
    assert set(codes.values()) == {0}, fleet.outputs()
