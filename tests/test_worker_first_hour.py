"""What a new user's first worker says (issue 37, "First hour"): its start-up line, per-job
lines and summary even in a project without a LOGGING setting, and where it looked for
consumers when it finds none."""

from __future__ import annotations

import pytest

from django_alkqueue import queue
from django_alkqueue.consumers import ConsumerRegistry
from django_alkqueue.worker import runner
from django_alkqueue.worker.exits import StartupRefused
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_in_a_project_without_logging_prints_its_start_job_lines_and_summary():
    job = queue("shop-reports").enqueue({})

    output = run_worker("--queue", "shop-reports", "--burst",
                        env={"ALKQUEUE_TEST_NO_LOGGING": "1"})  # fmt: skip

    assert "serving shop-reports with 4 threads" in output
    assert f"shop-reports job {job.id} succeeded" in output
    assert "succeeded  retried" in output  # the --burst summary table


def test_a_worker_with_no_consumer_says_where_it_looked_and_how_to_add_one(monkeypatch):
    monkeypatch.setattr(runner, "registry", ConsumerRegistry())
    monkeypatch.setattr(runner._TaskQueues, "declared", lambda self: [])

    with pytest.raises(StartupRefused) as refused:
        runner.resolve_specs(())

    message = str(refused.value)
    assert "no @consumer is registered and no task queue is declared" in message
    assert "testproject.shop.consumers" in message and "django_alkqueue.consumers" in message
    assert '@consumer("emails")' in message and "docs/consumers.md" in message
