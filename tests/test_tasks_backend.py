"""The django.tasks backend: Django's own backend expectations, ported, plus ours."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import PayloadError
from django_alkqueue.backend import AlkQueueBackend
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.models import TaskResult as TaskResultRecord
from django_alkqueue.tasks_compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from django_alkqueue.worker.maintenance import ReclaimService, SweepService
from testproject.shop import tasks
from testproject.shop.models import HandlerRun
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db


def drain(*queues: str) -> None:
    """Run a real worker in this process until nothing is due (needs transactional_db)."""
    call_command("alk_worker", queue=list(queues) or ["default"], burst=True, verbosity=0,
                 concurrency=2)  # fmt: skip


def test_the_default_backend_is_ours():
    backend = task_backends["default"]
    assert isinstance(backend, AlkQueueBackend)
    assert backend.supports_defer and backend.supports_priority
    assert backend.supports_get_result and backend.supports_async_task


def test_enqueue_writes_one_job_and_returns_a_ready_result():
    result = tasks.echo.enqueue(1, "two", three=[3])
    assert result.status == TaskResultStatus.READY
    assert isinstance(result.id, str)
    assert (result.args, result.kwargs) == ([1, "two"], {"three": [3]})
    assert result.enqueued_at is not None
    assert (result.started_at, result.finished_at, result.worker_ids, result.errors) == (
        None, None, [], [],
    )  # fmt: skip
    with pytest.raises(ValueError, match="not finished"):
        result.return_value  # noqa: B018
    job = QueueMessage.objects.get(pk=int(result.id))
    assert job.queue == "default"
    assert job.payload == {"task": "testproject.shop.tasks.echo", "args": [1, "two"],
                           "kwargs": {"three": [3]}, "backend": "default"}  # fmt: skip
    assert (job.max_attempts, job.backoff_base, job.lease) == (3, 0.0, 30.0)


def test_result_id_round_trips_through_get_result():
    result = tasks.add.enqueue(1, 2)
    again = task_backends["default"].get_result(result.id)
    assert (again.id, again.status, again.args, again.task) == (
        result.id, TaskResultStatus.READY, [1, 2], tasks.add,
    )  # fmt: skip
    assert tasks.add.get_result(result.id).id == result.id


def test_get_result_of_an_unknown_id_raises():
    for missing in ("123456789", "not-a-number", ""):
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(missing)


def test_aget_result_and_aenqueue_work_from_async_code(transactional_db):
    async def view():
        result = await tasks.add.aenqueue(4, 5)
        return await task_backends["default"].aget_result(result.id)

    # async_to_sync, as Django runs async views: the thread-sensitive calls come back here.
    got = async_to_sync(view)()
    assert got.status == TaskResultStatus.READY
    assert got.args == [4, 5]


def test_task_enqueued_is_sent():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result.id))

    task_enqueued.connect(receiver)
    try:
        result = tasks.add.enqueue(1, 1)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [(AlkQueueBackend, result.id)]


def test_run_after_maps_to_run_at_and_priority_to_priority():
    later = timezone.now() + timedelta(hours=1)
    result = tasks.add.using(run_after=later, priority=42).enqueue(1, 1)
    job = QueueMessage.objects.get(pk=int(result.id))
    assert (job.run_at, job.priority) == (later, 42)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"queue_name": "_reserved"}, "reserved"),
        ({"queue_name": "not-declared"}, "not valid for backend"),
        ({"priority": 101}, "priority"),
        ({"run_after": timezone.now().replace(tzinfo=None)}, "aware"),
    ],
)
def test_validate_task_rejects_what_the_backend_cannot_run(change, message):
    with pytest.raises(InvalidTask, match=message):
        tasks.add.using(**change)
    assert not QueueMessage.objects.exists()


def test_any_valid_queue_name_when_queues_is_empty():
    with override_settings(TASKS={"default": {
        "BACKEND": "django_alkqueue.backend.AlkQueueBackend", "QUEUES": []}}):  # fmt: skip
        result = tasks.add.using(queue_name="anything.goes").enqueue(1, 1)
        assert QueueMessage.objects.get(pk=int(result.id)).queue == "anything.goes"
        with pytest.raises(InvalidTask, match="invalid queue name"):
            tasks.add.using(queue_name="no spaces allowed")


def test_unknown_backend_options_are_refused():
    with pytest.raises(InvalidTask, match="unknown OPTIONS"):
        AlkQueueBackend("x", {"OPTIONS": {"max_attempt": 3}})


def test_queue_options_override_backend_options():
    backend = AlkQueueBackend("x", {"OPTIONS": {"max_attempts": 5},
                                    "QUEUE_OPTIONS": {"emails": {"max_attempts": 10}}})  # fmt: skip
    assert backend.job_options("emails")["max_attempts"] == 10
    assert backend.job_options("default")["max_attempts"] == 5


def test_a_rolled_back_view_leaves_no_task_job():
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.add.enqueue(1, 2)
        raise RuntimeError("the view failed")
    assert not QueueMessage.objects.exists()


def test_a_task_runs_and_its_result_is_successful(transactional_db):
    result = tasks.add.enqueue(20, 22)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42
    assert result.started_at is not None and result.finished_at is not None
    assert result.last_attempted_at is not None
    assert len(result.worker_ids) == 1 and result.attempts == 1
    assert not QueueMessage.objects.exists()


def test_arefresh_brings_the_return_value_of_a_task_that_ran(transactional_db):
    result = tasks.add.enqueue(20, 22)
    drain()
    async_to_sync(result.arefresh)()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


def test_a_result_not_finished_refuses_its_return_value_as_djangos_does(transactional_db):
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(ValueError, match="not finished"):
        result.return_value  # noqa: B018


def test_an_async_task_runs_in_the_worker(transactional_db):
    result = tasks.async_double.enqueue(21)
    drain()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)


def test_a_context_task_sees_its_attempt_across_retries(transactional_db):
    result = tasks.flaky.enqueue(succeed_on=3)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 3
    runs = list(HandlerRun.objects.filter(job_id=int(result.id)).values_list("attempt", flat=True))
    assert runs == [1, 2, 3]
    assert len(result.worker_ids) == 3
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"] * 2
    assert "not yet (attempt 1)" in result.errors[0].traceback


def test_a_task_out_of_attempts_is_failed_with_every_error(transactional_db):
    result = tasks.always_fails.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[-1].exception_class is RuntimeError
    assert len(result.errors) == 3 and result.attempts == 3
    assert result.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018
    assert DeadLetter.objects.get(job_id=int(result.id)).reason == "max attempts exceeded"


def test_a_non_json_return_value_fails_the_task(transactional_db):
    result = tasks.returns_non_json.enqueue()
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == "builtins.TypeError"


def test_task_started_and_task_finished_are_sent_with_correct_results(transactional_db):
    seen = []

    def started(sender, task_result, **kwargs):
        seen.append(("started", task_result.status, task_result.attempts))

    def finished(sender, task_result, **kwargs):
        seen.append(("finished", task_result.status, task_result.return_value))

    task_started.connect(started)
    task_finished.connect(finished)
    try:
        tasks.add.enqueue(1, 2)
        drain()
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    assert seen == [("started", TaskResultStatus.RUNNING, 1),
                    ("finished", TaskResultStatus.SUCCESSFUL, 3)]  # fmt: skip


def test_priorities_order_execution(transactional_db):
    for label, priority in [("low", -10), ("high", 50), ("middle", 0)]:
        tasks.record.using(priority=priority).enqueue(label)
    call_command("alk_worker", queue=["default"], burst=True, verbosity=0, concurrency=1)
    notes = list(HandlerRun.objects.order_by("id").values_list("note", flat=True))
    assert notes == ["high", "middle", "low"]


def test_run_after_defers_the_task(transactional_db):
    result = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 1)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert QueueMessage.objects.filter(pk=int(result.id)).exists()


def test_retained_results_are_pruned_after_retention(transactional_db):
    result = tasks.add.enqueue(1, 1)
    drain()
    record = TaskResultRecord.objects.get(job_id=int(result.id))
    clock = FakeClock(record.finished_at + timedelta(seconds=86400))
    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.SUCCESSFUL
    SweepService("default").run_once(clock())
    assert not TaskResultRecord.objects.exists()
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(result.id)


def test_result_retention_zero_keeps_no_result(transactional_db):
    with override_settings(TASKS={"default": {
        "BACKEND": "django_alkqueue.backend.AlkQueueBackend",
        "OPTIONS": {"result_retention": 0, "backoff_base": 0}}}):  # fmt: skip
        result = tasks.add.enqueue(1, 1)
        drain()
        with pytest.raises(TaskResultDoesNotExist):
            task_backends["default"].get_result(result.id)


def test_results_of_jobs_that_left_without_closing_them_are_closed_by_the_sweeper(
    transactional_db,
):
    from django_alkqueue import queue

    crashed = tasks.add.enqueue(1, 1)
    cancelled = tasks.add.enqueue(2, 2)
    for result in (crashed, cancelled):  # an attempt started, then the job left
        job = queue("default").get_job(int(result.id))
        TaskResultRecord.objects.create(
            job_id=job.id, backend="default", task_path=job.payload["task"], queue="default",
            status="RUNNING", enqueued_at=job.enqueued_at, worker_ids=["w"],
        )  # fmt: skip
    QueueMessage.objects.filter(pk=int(crashed.id)).update(max_attempts=1)
    queue("default").claim("w", 1)  # its last attempt: the worker then crashes
    clock = FakeClock(timezone.now() + timedelta(minutes=5))
    ReclaimService("default").run_once(clock())  # the crashed worker's job is dead-lettered
    queue("default").cancel(int(cancelled.id))
    SweepService("default").run_once(clock())
    record = TaskResultRecord.objects.get(job_id=int(crashed.id))
    assert record.status == "FAILED" and record.expires_at is not None
    assert not TaskResultRecord.objects.filter(job_id=int(cancelled.id)).exists()
    assert task_backends["default"].get_result(crashed.id).status == TaskResultStatus.FAILED


# -- NUL characters: jsonb refuses them (docs/tasks.md, "NUL characters") ------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "path"),
    [
        (("a\x00b",), {}, "args[0]"),
        ((), {"note": ["ok", "a\x00b"]}, "kwargs['note'][1]"),
        (({"k\x00": 1},), {}, "args[0] has a key"),
    ],
)
def test_a_task_argument_with_a_nul_is_refused_at_enqueue_and_nothing_is_written(
    args, kwargs, path
):
    with pytest.raises(PayloadError, match=re.escape(path)):
        tasks.echo.enqueue(*args, **kwargs)

    assert not QueueMessage.objects.exists()


def test_a_tasks_return_value_with_a_nul_is_kept_escaped_and_the_task_runs_once(
    transactional_db,
):
    result = tasks.returns_nul.enqueue()

    drain()

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"s": "a\\x00b", "k\\x00": "v"}
    assert result.attempts == 1


def test_a_tasks_error_text_with_a_nul_is_kept_escaped(transactional_db):
    result = tasks.fails_with_nul.enqueue()

    drain()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 3
    assert "ValueError: a message with a \\x00 NUL" in result.errors[0].traceback
    dead = DeadLetter.objects.get(job_id=int(result.id))
    assert dead.last_error.startswith("ValueError: a message with a \\x00 NUL")


def test_a_tasks_nan_return_value_fails_the_task_with_a_payload_error(transactional_db):
    """NaN has no strict JSON form: refused on every database (PostgreSQL's jsonb would
    refuse it with a DataError, SQLite would keep it)."""
    result = tasks.returns_nan.enqueue()

    drain()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in result.errors] == [
        "django_alkqueue.exceptions.PayloadError"
    ] * 3
    assert "the task's return value cannot be stored as JSON" in result.errors[0].traceback
