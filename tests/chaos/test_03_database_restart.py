"""Scenario 3, database restart: PostgreSQL is restarted twice while three workers drain a
queue. The workers reconnect on their own, the drain completes, and the invariant holds;
jobs whose outcome could not be written during an outage come back when their lease lapses."""

from __future__ import annotations

import random
import subprocess

import pytest
from django.db import connections
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from testproject.chaos.models import ExecutionLog

from .conftest import cluster_command
from .harness import Fleet, riding_out, serving, wait_for
from .invariants import Fault, check
from .record import Stopwatch, record
from .scale import pick

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.serial,
    pytest.mark.django_db(transaction=True),
]

QUEUE = "chaos-restart"  # lease 3 s, 10 attempts, 0.1 s between them
JOBS = pick(short=1_500, long=6_000)
RESTARTS = 2
WORKERS, THREADS = 3, 4
HANDLER_MS = (40, 80)
#: After a restart, connections broken by it fail at their next use, which may come a
#: little later (a handler thread that was idle): count the fault as lasting this much longer.
SETTLE = 10.0
SEED = 3


def executions() -> int:
    return riding_out(lambda: ExecutionLog.objects.filter(queue=QUEUE).count())


def remaining() -> int:
    return riding_out(lambda: QueueMessage.objects.filter(queue=QUEUE).count())


def test_workers_ride_out_two_database_restarts_and_finish_the_drain(fleet: Fleet):
    restart = cluster_command("restart")
    rng = random.Random(SEED)
    jobs = queue(QUEUE).enqueue_many(
        [{"i": i, "ms": round(rng.uniform(*HANDLER_MS), 1)} for i in range(JOBS)]
    )
    clock = Stopwatch()
    for n in range(WORKERS):
        fleet.start(*serving(QUEUE, threads=THREADS), worker_id=f"restart-{n}")

    faults: list[Fault] = []
    outages: list[float] = []
    left_after: list[int] = []
    wait_for(lambda: executions() >= JOBS * 0.15, timeout=120, what="15% of the jobs run")
    for _ in range(RESTARTS):
        # A restart takes seconds (the shutdown checkpoint), and the workers run on until the
        # server goes down: each one must come back to jobs still waiting.
        started = timezone.now()
        subprocess.run(restart, check=True, capture_output=True, timeout=120)
        connections.close_all()  # this test's own connection died with the server
        faults.append(Fault("database restart", started, timezone.now()).settled(SETTLE))
        outages.append(round((timezone.now() - started).total_seconds(), 1))
        left_after.append(remaining())
        assert left_after[-1] > WORKERS * THREADS, "the drain ended during the restart"
        seen = executions()
        wait_for(
            lambda seen=seen: executions() > seen + WORKERS * THREADS,
            timeout=60,
            what="the workers' progress after the restart",
        )

    wait_for(
        lambda: remaining() == 0,
        timeout=pick(120, 600),
        what=f"drain of {JOBS} jobs",
    )
    drained_in = clock.seconds()
    alive = [w.alive() for w in fleet.started]
    codes = fleet.stop_all()

    report = check(
        [j.id for j in jobs], faults, expect=dict.fromkeys((j.id for j in jobs), "acked")
    )
    output = fleet.outputs()
    record(
        3,
        "Database restart",
        f"{WORKERS} workers x {THREADS} threads drain {JOBS:,} jobs of {HANDLER_MS[0]}-"
        f"{HANDLER_MS[1]} ms (lease 3 s); PostgreSQL restarted twice mid-drain (at 15%, then "
        "as soon as the workers made progress again)",
        report,
        clock.seconds(),
        {
            "restarts": len(faults),
            "restart_seconds": outages,
            "jobs_left_after_each_restart": left_after,
            "drain_seconds": drained_in,
            "worker_database_errors_logged": output.count("database error"),
        },
    )
    assert report.ok, report.summary() + output
    assert all(alive), output
    assert set(codes.values()) == {0}, output
    assert "database error" in output  # the restarts did reach the workers
