"""Tasks and periodic jobs with real `alk_worker` processes."""

from __future__ import annotations

import signal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from django_alkqueue.models import JobStep, QueueMessage, Worker
from django_alkqueue.tasks_compat import TaskResultStatus, task_backends
from testproject.shop import tasks
from testproject.shop.models import HandlerRun
from tests.conftest import wait_until
from tests.workers import run_worker, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)


def status_of(result_id: str) -> str:
    return str(task_backends["default"].get_result(result_id).status)


def test_get_result_goes_through_every_status_with_a_real_worker():
    slow = tasks.slow.enqueue(1.0)
    failing = tasks.always_fails.enqueue()
    assert status_of(slow.id) == TaskResultStatus.READY
    worker = start_worker("--queue", "default", "--concurrency", "2")
    try:
        wait_until(lambda: status_of(slow.id) == TaskResultStatus.RUNNING, timeout=20)
        wait_until(lambda: status_of(slow.id) == TaskResultStatus.SUCCESSFUL, timeout=20)
        wait_until(lambda: status_of(failing.id) == TaskResultStatus.FAILED, timeout=20)
    finally:
        output = stop(worker)
    assert worker.returncode == 0, output
    slow.refresh()
    assert slow.return_value == 1.0
    assert slow.worker_ids[0].endswith(f":{worker.pid}")


def test_a_queue_cannot_be_both_a_task_queue_and_a_consumer_queue():
    backend = {"BACKEND": "django_alkqueue.backend.AlkQueueBackend",
               "QUEUES": ["default", "shop-emails"]}  # fmt: skip
    with (
        override_settings(TASKS={"default": backend}),
        pytest.raises(CommandError, match=r"shop-emails.*one or the other"),
    ):
        call_command("alk_worker", burst=True)


def test_periodic_ticks_are_enqueued_once_with_three_workers_racing():
    env = {"ALKQUEUE_EVERY_SECOND": "1"}
    workers = [start_worker("--queue", "shop-emails", env=env) for _ in range(3)]
    try:
        wait_until(lambda: QueueMessage.objects.filter(queue="health").count() >= 4, timeout=30)
    finally:
        for worker in workers:
            stop(worker)
    assert all(w.returncode == 0 for w in workers)
    keys = list(QueueMessage.objects.filter(queue="health").values_list("unique_key", flat=True))
    assert len(keys) == len(set(keys)) >= 4
    ticks = sorted(key.rsplit(":", 3)[-3:][0] for key in keys)
    assert len(ticks) == len(keys)


def test_a_task_worker_stops_cleanly_on_sigint_and_unregisters():
    worker = start_worker("--queue", "default")
    wait_until(lambda: Worker.objects.filter(pid=worker.pid).exists(), timeout=20)
    output = stop(worker, signal.SIGINT)
    assert worker.returncode == 0, output
    assert not Worker.objects.filter(pid=worker.pid).exists()


def test_a_task_that_takes_context_records_durable_steps_through_its_job():
    result = tasks.stepped.enqueue(7)

    run_worker("--queue", "default", "--burst")

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == ["ran first 7", "ran second 7"]
    notes = HandlerRun.objects.filter(job_id=int(result.id)).order_by("id")
    # Two attempts; the first step's function ran once, the retry got its recorded value.
    assert list(notes.values_list("note", flat=True)) == ["ran first 7", "ran second 7"]
    assert not JobStep.objects.filter(job_id=int(result.id)).exists()  # gone with the ack
