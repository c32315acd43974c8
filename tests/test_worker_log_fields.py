"""Every record the worker logs about a job carries its fields as `extra`, so that a JSON
formatter (docs/operations.md, "Logs") shows them: read from a real worker's JSON output."""

from __future__ import annotations

import json
import logging

import pytest

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from django_alkqueue.reports.worker_report import JOB_FIELDS, JobFieldDefaults
from tests.conftest import RUNNING_CONSUMERS, wait_until
from tests.workers import Watched, run_worker, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)


def json_records(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@pytest.fixture
def burst() -> tuple[list[int], list[dict[str, object]]]:
    """A burst worker that ran one job to each outcome: the jobs' ids and its records."""
    reports = queue("shop-reports")
    ids = [reports.enqueue(payload).id for payload in ({}, {"fail_times": 1}, {"fail": "no"})]
    # -v 2: a success's line is DEBUG (reports/worker_report.py).
    output = run_worker("--queue", "shop-reports", "--burst", "--worker-id", "logs-1", "-v", "2",
                        env={"ALKQUEUE_JSON_LOGS": "1"})  # fmt: skip
    return ids, json_records(output)


@pytest.fixture
def job_records(burst) -> dict[int, list[dict[str, object]]]:
    """The burst worker's records about a job, by job id."""
    ids, output = burst
    records: dict[int, list[dict[str, object]]] = {job_id: [] for job_id in ids}
    for record in output:
        if record.get("job_id") in records:
            records[record["job_id"]].append(record)  # type: ignore[index]
    return records


def test_each_job_record_carries_every_job_field(job_records):
    records = [r for rs in job_records.values() for r in rs]
    assert records
    for record in records:
        assert set(JOB_FIELDS) <= set(record), record


def test_the_fields_name_the_queue_the_worker_the_attempt_and_the_outcome(job_records):
    succeeded, retried, dead = job_records.values()
    assert [(r["attempt"], r["outcome"]) for r in succeeded] == [(1, "succeeded")]
    assert [(r["attempt"], r["outcome"]) for r in retried] == [(1, "retried"), (2, "succeeded")]
    assert [(r["attempt"], r["outcome"]) for r in dead] == [(1, "dead")]
    for record in [*succeeded, *retried, *dead]:
        assert (record["queue"], record["worker_id"]) == ("shop-reports", "logs-1")
        assert isinstance(record["duration_ms"], float) and record["duration_ms"] >= 0


def test_a_record_about_the_worker_itself_carries_every_job_field_as_null(burst):
    _, records = burst
    (serving,) = [r for r in records if str(r["message"]).startswith("worker logs-1 serving")]
    assert {field: serving[field] for field in JOB_FIELDS} == dict.fromkeys(JOB_FIELDS)


def test_the_defaults_fill_only_the_fields_a_record_lacks():
    record = logging.LogRecord("django_alkqueue", logging.INFO, __file__, 1, "m", None, None)
    record.job_id = 7

    assert JobFieldDefaults().filter(record)

    assert record.job_id == 7
    assert [getattr(record, f) for f in JOB_FIELDS if f != "job_id"] == [None] * 5


@pytest.mark.usefixtures("running_consumers")
def test_the_process_pools_terminating_child_record_names_its_job():
    job = queue("overrunning-unwound").enqueue({})
    env = {**RUNNING_CONSUMERS, "ALKQUEUE_JSON_LOGS": "1"}
    worker = Watched(start_worker("--pool", "process", "--queue", "overrunning-unwound",
                                  "--concurrency", "1", "--shutdown-timeout", "2",
                                  "--worker-id", "logs-2", env=env))  # fmt: skip
    try:
        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), timeout=60,
                   what=f"the second attempt acked\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    (terminating,) = [r for r in json_records(worker.output)
                      if str(r["message"]).startswith("terminating child")]  # fmt: skip
    assert {field: terminating[field] for field in JOB_FIELDS} == {
        "queue": "overrunning-unwound", "job_id": job.id, "attempt": 1, "worker_id": "logs-2",
        "duration_ms": None, "outcome": None,
    }  # fmt: skip
