"""Consumers of the debounce and unique window worker tests (tests/test_enqueue_controls_
workers.py), imported only by their worker subprocesses (ALKQUEUE_EXTRA_CONSUMERS). Each job
writes its id and payload into the table RUNS, which the test created; a payload with
"sleep" holds the job that long first, so that a test can enqueue while it runs."""

from __future__ import annotations

import json
import time
from typing import Any

from django.db import connection

from django_alkqueue import Job, consumer

DEBOUNCED = "debounced-work"
WINDOWED = "windowed-work"
RUNS = "enqueue_control_runs"


def _record(payload: Any, job: Job) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUNS} (job_id, queue, payload, phase) VALUES (%s, %s, %s, %s)",
            [job.id, job.queue, json.dumps(payload, sort_keys=True), "started"],
        )
    time.sleep(float(payload.get("sleep", 0)) if isinstance(payload, dict) else 0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUNS} (job_id, queue, payload, phase) VALUES (%s, %s, %s, %s)",
            [job.id, job.queue, json.dumps(payload, sort_keys=True), "finished"],
        )


@consumer(DEBOUNCED)
def run_debounced(payload: Any, job: Job) -> None:
    _record(payload, job)


@consumer(WINDOWED)
def run_windowed(payload: Any, job: Job) -> None:
    _record(payload, job)
