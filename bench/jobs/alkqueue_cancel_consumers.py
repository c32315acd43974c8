"""The consumer of the cancel-latency bench (bench/cancel_latency.py): it records its start,
then checks its cancel flag every millisecond and records the moment it saw it, in the table
RUNS, which the bench creates and reads."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection

from django_alkqueue import Job, consumer

RUNS = "bench_cancel_runs"
#: How long a job waits for its cancel before it gives up (and records no stop).
PATIENCE = 60.0


@consumer("cancel-latency")
def wait_for_cancel(payload: Any, job: Any) -> None:
    _write(f"INSERT INTO {RUNS} (job_id, started_at) VALUES (%s, %s)", job)
    until = time.monotonic() + PATIENCE
    while time.monotonic() < until:
        if job.cancelled:
            _write(f"UPDATE {RUNS} SET stopped_at = %s WHERE job_id = %s", job, first="time")
            job.check_cancelled()
        time.sleep(0.001)


def _write(statement: str, job: Job, first: str = "id") -> None:
    params = [job.id, time.time()] if first == "id" else [time.time(), job.id]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
