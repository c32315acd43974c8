"""Every record the worker logs about a job carries its fields as `extra`, so that a JSON
formatter (docs/operations.md, "Logs") shows them: read from a real worker's JSON output."""

from __future__ import annotations

import json

import pytest

from django_alkqueue import queue
from django_alkqueue.worker.report import JOB_FIELDS
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)


def json_records(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@pytest.fixture
def job_records() -> dict[int, list[dict[str, object]]]:
    """The records of a burst worker that ran one job to each outcome, by job id."""
    reports = queue("shop-reports")
    ids = [reports.enqueue(payload).id for payload in ({}, {"fail_times": 1}, {"fail": "no"})]
    output = run_worker("--queue", "shop-reports", "--burst", "--worker-id", "logs-1",
                        env={"ALKQUEUE_JSON_LOGS": "1"})  # fmt: skip
    records: dict[int, list[dict[str, object]]] = {job_id: [] for job_id in ids}
    for record in json_records(output):
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
