"""What a new user's first worker says (issue 37, "First hour"): its start-up line, the lines
of jobs that did not succeed (a success's line is -v 2's, issue 39) and summary even in a
project without a LOGGING setting, and where it looked for consumers when it finds none."""

from __future__ import annotations

import signal

import pytest

from django_alkqueue import queue, task_queues
from django_alkqueue.consumers import ConsumerRegistry
from django_alkqueue.models import QueueMessage
from django_alkqueue.worker import served
from django_alkqueue.worker.exits import StartupRefused
from tests.conftest import wait_until
from tests.workers import run_worker, start_worker, stop

NO_LOGGING = {"ALKQUEUE_TEST_NO_LOGGING": "1"}

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_in_a_project_without_logging_prints_its_start_failures_and_summary():
    reports = queue("shop-reports")
    job, failing = reports.enqueue({}), reports.enqueue({"fail_times": 1})

    output = run_worker("--queue", "shop-reports", "--burst",
                        env=NO_LOGGING)  # fmt: skip

    assert "serving shop-reports with 4 threads" in output
    assert f"shop-reports job {failing.id} retried" in output
    # A success's line is for -v 2: at -v 1 the summary counts it (docs/worker.md, "Logging").
    assert f"shop-reports job {job.id} succeeded" not in output
    assert "succeeded  retried" in output  # the --burst summary table


def test_at_verbosity_2_a_worker_prints_a_line_per_success():
    job = queue("shop-reports").enqueue({})

    output = run_worker("--queue", "shop-reports", "--burst", "-v", "2", env=NO_LOGGING)

    assert f"shop-reports job {job.id} succeeded" in output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_worker_stopped_by_a_signal_logs_its_summary_in_a_project_without_logging(sig):
    jobs = queue("shop-reports").enqueue_many([{}, {}])
    # Its output is a pipe, not a terminal: no live status line stands in for the summary.
    worker = start_worker("--queue", "shop-reports", env=NO_LOGGING)
    try:
        wait_until(lambda: not QueueMessage.objects.filter(pk__in=[j.id for j in jobs]).exists(),
                   timeout=30, what="both jobs done")  # fmt: skip
    finally:
        output = stop(worker, sig, timeout=30)

    assert worker.returncode == 0, output
    assert "stopped: processed 2, failed 0, dead 0" in output
    assert "succeeded  retried" in output  # the table --burst prints
    table = output[output.index("succeeded  retried") :].splitlines()
    assert table[2].split() == ["shop-reports", "2", "0", "0", "0", "0", "0", "0"]


def test_a_worker_with_no_consumer_says_where_it_looked_and_how_to_add_one(monkeypatch):
    monkeypatch.setattr(served, "registry", ConsumerRegistry())
    monkeypatch.setattr(task_queues, "declared", lambda: [])

    with pytest.raises(StartupRefused) as refused:
        served.resolve_specs(())

    message = str(refused.value)
    assert "no @consumer is registered and no task queue is declared" in message
    assert "testproject.shop.consumers" in message and "django_alkqueue.consumers" in message
    assert '@consumer("emails")' in message and "docs/consumers.md" in message
