"""The consumers of the workflow bench (bench/workflows.py): a no-op for the batch drain,
and one that notes when each job ran and finished, for the latencies."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection

from django_alkqueue import consumer

MEMBERS = "wf-members"
TIMED = "wf-timed"
CALLBACKS = "wf-callbacks"
#: job id, queue, when its handler started (claimed_at of the job) and returned (epoch s).
TIMES = "bench_workflow_times"


@consumer(MEMBERS)
def noop(payload: Any, job: Any) -> None:
    return None


@consumer(TIMED)
def timed(payload: Any, job: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TIMES} (job_id, claimed_at, returned_at) VALUES (%s, %s, %s)",
            [job.id, job.claimed_at.timestamp(), time.time()],
        )
