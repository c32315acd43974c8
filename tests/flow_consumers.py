"""Consumers of the flow-control worker tests (tests/test_flow_control_workers.py), imported
only by their worker subprocesses (ALKQUEUE_EXTRA_CONSUMERS). Each job writes when it was
claimed and when it finished into the table FLOW_RUNS, which the test created."""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from django.db import connection
from django.utils import timezone

from django_alkqueue import Job, consumer

QUEUE = "flow-workers"
FLOW_RUNS = "flow_test_runs"
LIMITS: dict[str, Any] = json.loads(os.environ.get("FLOW_TEST_LIMITS", "{}"))
#: The most seconds a job sleeps (a random share of it), so that claims overlap.
SLEEP = float(os.environ.get("FLOW_TEST_SLEEP", "0.005"))


@consumer(QUEUE, **LIMITS)
def record_run(payload: Any, job: Job) -> None:
    time.sleep(random.random() * SLEEP)
    assert job.claimed_at is not None
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {FLOW_RUNS} (job_id, attempt, ckey, claimed_at, finished_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            [job.id, job.attempts, job.concurrency_key, job.claimed_at.timestamp(),
             timezone.now().timestamp()],
        )  # fmt: skip
