"""Stop signals: the first finishes in-flight jobs, a second exits at once, however soon it
comes; a supervised child that gets a stop both from systemd (every process of the unit's
control group) and from its supervisor still shuts down gracefully."""

from __future__ import annotations

import os
import signal
import time

import pytest

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage, Worker
from tests.conftest import wait_until
from tests.test_worker_command import has_run, is_gone, live, runs_of, workers  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_sigterm_then_sigint_sent_back_to_back_exit_at_once(workers):  # noqa: F811
    job = queue("shop-reports").enqueue({"sleep": 30})
    worker = workers("--queue", "shop-reports", "--concurrency", "1", "--shutdown-timeout", "30")
    wait_until(has_run(job), timeout=15)

    started = time.monotonic()
    os.kill(worker.pid, signal.SIGTERM)
    os.kill(worker.pid, signal.SIGINT)

    assert worker.wait(10) == 1, worker.output
    assert time.monotonic() - started < 5, worker.output
    row = live(job)  # not released: its lease lapses and reclaim returns it
    assert row is not None and row.claim_token is not None


def test_a_second_sigterm_exits_at_once(workers):  # noqa: F811
    job = queue("shop-reports").enqueue({"sleep": 30})
    worker = workers("--queue", "shop-reports", "--concurrency", "1", "--shutdown-timeout", "30")
    wait_until(has_run(job), timeout=15)
    os.kill(worker.pid, signal.SIGTERM)
    # The same signal twice before the first is delivered is one signal (the kernel keeps
    # one pending SIGTERM), so this one waits until the worker has taken the first.
    wait_until(lambda: "finishing in-flight jobs" in worker.output, timeout=10)

    os.kill(worker.pid, signal.SIGTERM)

    assert worker.wait(10) == 1, worker.output


def test_a_child_signalled_by_systemd_and_by_its_supervisor_shuts_down_gracefully(workers):  # noqa: F811
    job = queue("shop-reports").enqueue({"sleep": 2})
    supervisor = workers(
        "--queue", "shop-reports", "--processes", "2", "--concurrency", "1",
        "--shutdown-timeout", "30", "--poll-interval", "0.2",
    )  # fmt: skip
    wait_until(lambda: Worker.objects.count() == 2, timeout=20)
    wait_until(has_run(job), timeout=15)
    children = list(Worker.objects.values_list("pid", flat=True))

    # KillMode=control-group: systemd sends SIGTERM to every process of the unit at once.
    for pid in [supervisor.pid, *children]:
        os.kill(pid, signal.SIGTERM)

    assert supervisor.wait(30) == 0, supervisor.output
    assert runs_of(job) == [1], supervisor.output
    assert is_gone(job)(), supervisor.output  # finished and acked, not abandoned
    assert not QueueMessage.objects.exists()
    assert not Worker.objects.exists(), supervisor.output  # both children exited cleanly
