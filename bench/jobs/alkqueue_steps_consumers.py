"""The consumers of the durable steps bench (bench/durable_steps.py): ten no-op steps, a
wait for a signal that notes when it resumed, a 2 s sleep, and a no-op."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.db import connection

from django_alkqueue import consumer

STEPS = "st-steps"
WAITS = "st-waits"
SLEEPS = "st-sleeps"
PLAIN = "st-plain"
#: Steps per job of STEPS.
STEPS_PER_JOB = 10
#: job id, when its handler ran again after the signal (epoch s).
RESUMED = "bench_signal_resumed"


def nothing() -> None:
    return None


@consumer(STEPS)
def ten_steps(payload: Any, job: Any) -> None:
    for i in range(STEPS_PER_JOB):
        job.step(f"step-{i}", nothing)


@consumer(WAITS)
def wait_for_go(payload: Any, job: Any) -> None:
    job.wait_for("go")
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {RESUMED} (job_id, resumed_at) VALUES (%s, %s)",
                       [job.id, time.time()])  # fmt: skip


@consumer(SLEEPS)
def nap(payload: Any, job: Any) -> None:
    job.sleep("nap", timedelta(seconds=2))


@consumer(PLAIN)
def noop(payload: Any, job: Any) -> None:
    return None
