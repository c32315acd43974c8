"""Task results: the task as enqueued, canonical result ids, rows on the queue database, and
a requeued task's reused result row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import TaskResult as TaskResultRecord
from django_alkqueue.task_runner import run_task_job
from django_alkqueue.tasks_compat import (
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_started,
)
from django_alkqueue.worker.maintenance import SweepService
from testproject.shop import tasks

pytestmark = pytest.mark.django_db

ALT_BACKEND = {"BACKEND": "django_alkqueue.backend.AlkQueueBackend", "QUEUES": ["alt"]}
TWO_BACKENDS = {"default": settings.TASKS["default"], "alt": ALT_BACKEND}


def run_one(queue_name: str, using: str = "default") -> None:
    """Claim the queue's next job and run it with the built-in task consumer, then ack it."""
    handle = queue(queue_name, using=using).claim("test-worker", 1)[0]
    run_task_job(handle.job.payload, handle.job)
    handle.ack()


# -- the task as enqueued ---------------------------------------------------------------------


def test_get_result_returns_the_task_with_its_using_overrides():
    later = timezone.now() + timedelta(hours=1)
    enqueued = tasks.add.using(priority=7, queue_name="tasks-high", run_after=later).enqueue(1, 2)
    assert tasks.add.get_result(enqueued.id).task == enqueued.task


@override_settings(TASKS=TWO_BACKENDS)
def test_a_result_from_a_second_backend_names_that_backend():
    enqueued = tasks.add.using(backend="alt", queue_name="alt").enqueue(3, 4)
    result = task_backends["alt"].get_result(enqueued.id)
    assert (result.task.backend, result.task.queue_name) == ("alt", "alt")
    assert result.task == enqueued.task


@override_settings(TASKS=TWO_BACKENDS)
def test_refresh_after_get_result_asks_the_backend_that_holds_the_result():
    enqueued = tasks.add.using(backend="alt", queue_name="alt").enqueue(3, 4)
    result = task_backends["alt"].get_result(enqueued.id)
    run_one("alt")
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 7)


@override_settings(TASKS=TWO_BACKENDS)
def test_a_finished_result_keeps_its_backend_and_queue():
    enqueued = tasks.add.using(backend="alt", queue_name="alt").enqueue(3, 4)
    run_one("alt")
    result = task_backends["alt"].get_result(enqueued.id)  # built from the result row alone
    assert (result.task.backend, result.task.queue_name) == ("alt", "alt")
    result.refresh()
    assert result.return_value == 7


def test_a_finished_result_keeps_the_priority_and_run_after_it_was_enqueued_with():
    soon = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    enqueued = tasks.add.using(priority=7, run_after=soon).enqueue(3, 4)
    run_one("default")
    result = tasks.add.get_result(enqueued.id)  # built from the result row alone
    assert (result.task.priority, result.task.run_after) == (7, soon)
    assert result.task == enqueued.task


def test_a_result_whose_queue_left_queues_still_shows_the_task_as_enqueued():
    enqueued = tasks.add.using(queue_name="tasks-high").enqueue(1, 2)
    narrower = {**settings.TASKS["default"], "QUEUES": ["default"]}
    with override_settings(TASKS={"default": narrower}):
        result = task_backends["default"].get_result(enqueued.id)
    assert result.task.queue_name == "tasks-high"


# -- result ids -------------------------------------------------------------------------------


def other_spellings(job_id: int) -> list[str]:
    """Strings int() reads as `job_id` that are not its canonical decimal form."""
    text = str(job_id)
    return [f" {text} ", f"{text}\n", f"0{text}", f"+{text}", f"0_{text}",
            text.translate(str.maketrans("0123456789", "०१२३४५६७८९"))]  # fmt: skip


def test_a_result_id_is_only_the_canonical_decimal_job_id():
    enqueued = tasks.add.enqueue(1, 1)
    for spelling in other_spellings(int(enqueued.id)):
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(spelling)
    assert task_backends["default"].get_result(enqueued.id).id == enqueued.id


@pytest.mark.parametrize(
    "result_id", ["9223372036854775807", "9223372036854775808", "1" * 30, "0", "-1", ""]
)
def test_a_result_id_outside_the_job_ids_does_not_exist(result_id):
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(result_id)


def test_a_result_id_must_be_a_string():
    enqueued = tasks.add.enqueue(1, 1)
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(int(enqueued.id))


# -- the database of the result rows ----------------------------------------------------------


@pytest.mark.django_db(databases=["default", "other"])
def test_result_rows_are_written_to_the_alkqueue_database():
    with override_settings(ALKQUEUE={"DATABASE": "other"}):
        enqueued = tasks.add.enqueue(1, 2)
        run_one("default", using="other")
        assert task_backends["default"].get_result(enqueued.id).return_value == 3
    assert TaskResultRecord.objects.using("other").filter(job_id=int(enqueued.id)).exists()
    assert not TaskResultRecord.objects.using("default").exists()


# -- a requeued task ---------------------------------------------------------------------------


def test_a_requeued_tasks_reused_result_row_does_not_expire_while_it_runs():
    enqueued = tasks.add.enqueue(2, 3)
    job_id = int(enqueued.id)
    past = timezone.now() - timedelta(seconds=1)
    TaskResultRecord.objects.create(  # its earlier run failed; the result expired, not pruned
        job_id=job_id, backend="default", task_path="testproject.shop.tasks.add",
        queue="default", status="FAILED", enqueued_at=past, finished_at=past, expires_at=past,
        errors=[{"exception_class_path": "builtins.RuntimeError", "traceback": "..."}],
        worker_ids=["earlier-worker"],
    )  # fmt: skip
    seen = []

    def mid_run(sender, task_result, **kwargs):
        SweepService("default").run_once(timezone.now() + timedelta(minutes=1))
        seen.append(task_backends["default"].get_result(enqueued.id))

    task_started.connect(mid_run)
    try:
        run_one("default")
    finally:
        task_started.disconnect(mid_run)
    assert seen[0].status == TaskResultStatus.RUNNING
    assert seen[0].finished_at is None
    assert seen[0].worker_ids == ["earlier-worker", "test-worker"]
    result = task_backends["default"].get_result(enqueued.id)
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert len(result.errors) == 1
