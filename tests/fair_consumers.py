"""The consumer of the fair-share worker tests (tests/test_fair_share_workers.py), imported only
by their worker subprocesses (ALKQUEUE_EXTRA_CONSUMERS). Each job writes its tenant (its
payload) and when it ran, on the worker's monotonic clock, into FAIR_RUNS, which the test
created: with one worker thread, that is the order the jobs ran in."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection

from django_alkqueue import Job, consumer

QUEUE = "fair-workers"
FAIR_RUNS = "fair_test_runs"


@consumer(QUEUE)
def record_run(payload: Any, job: Job) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {FAIR_RUNS} (job_id, tenant, ran_at) VALUES (%s, %s, %s)",
            [job.id, payload, time.monotonic_ns()],
        )
