"""Consumers of the workflow worker tests (tests/test_workflow_workers.py), imported only by
their worker subprocesses (ALKQUEUE_EXTRA_CONSUMERS). Each job writes its id, queue, payload
and when it ran into WORKFLOW_RUNS, which the test created. A job whose payload holds
{"fail": key} fails for good until WORKFLOW_FIXED holds that key."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from django.db import connection

from django_alkqueue import Fail, Job, consumer

QUEUES = ("wf-a", "wf-b", "wf-c", "wf-callback")
WORKFLOW_RUNS = "workflow_test_runs"
WORKFLOW_FIXED = "workflow_test_fixed"


def record(payload: Any, job: Job) -> None:
    time.sleep(random.random() * 0.003)
    if isinstance(payload, dict) and "fail" in payload:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM {WORKFLOW_FIXED} WHERE fixed = %s", [payload["fail"]])
            if cursor.fetchone() is None:
                raise Fail("not fixed yet")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {WORKFLOW_RUNS} (job_id, queue, payload, ran_at) VALUES (%s, %s, %s, %s)",
            [job.id, job.queue, json.dumps(payload), time.time()],
        )


for _name in QUEUES:
    consumer(_name, max_attempts=1)(record)
