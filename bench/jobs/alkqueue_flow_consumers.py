"""The consumers of the flow-control bench (bench/flow_control.py), one queue per setting of
the limits compared. The worker runs record each job's claim time, start and end in the table
RUNS, which the bench creates and reads."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection

from django_alkqueue import Job, consumer

from . import noop

RUNS = "bench_flow_runs"
#: What a job of the busy run sleeps.
SLEEP = 0.010


def record(job: Job, started: float) -> None:
    assert job.claimed_at is not None
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUNS} (job_id, claimed_at, started_at, finished_at) "
            "VALUES (%s, %s, %s, %s)",
            [job.id, job.claimed_at.timestamp(), started, time.time()],
        )


# Claim+ack cost in one process (the bench claims and acks these itself): no limits, a cap
# that never binds, one job at a time per key over 1,000 keys.
@consumer("flow-none")
def none(payload: Any, job: Job) -> None:
    noop(payload)


@consumer("flow-cap", concurrency=100_000)
def cap(payload: Any, job: Job) -> None:
    noop(payload)


@consumer("flow-key", key_concurrency=1)
def per_key(payload: Any, job: Job) -> None:
    noop(payload)


# Drains by worker processes.
@consumer("flow-drain-none")
def drain_none(payload: Any, job: Job) -> None:
    noop(payload)


@consumer("flow-drain-key", key_concurrency=1)
def drain_key(payload: Any, job: Job) -> None:
    noop(payload)


@consumer("flow-busy", concurrency=8)
def busy(payload: Any, job: Job) -> None:
    started = time.time()
    time.sleep(SLEEP)
    record(job, started)


@consumer("flow-rate", rate="2000/s")
def rated(payload: Any, job: Job) -> None:
    record(job, time.time())
