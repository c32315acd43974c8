"""The django.tasks backend: plain `@task` code runs on django-alkqueue.

A task becomes one live job whose payload names the task, its arguments and the backend
alias; `alk_worker` runs it with the built-in task consumer (task_runner.py). Results are
assembled from the live job or its dead letter and the task's result row (models.TaskResult).
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from . import operations, validation
from .clock import system_clock
from .conf import get_settings
from .exceptions import InvalidName
from .jobs import Job
from .models import TaskResult as TaskResultRecord
from .queues import queue
from .tasks_compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)

OPTION_DEFAULTS: dict[str, Any] = {
    "max_attempts": 5,
    "backoff_base": 5,
    "lease": 30,
    "result_retention": 86400,
}


class AlkQueueBackend(BaseTaskBackend):
    supports_defer = True
    supports_priority = True
    supports_get_result = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.queue_options: dict[str, dict[str, Any]] = params.get("QUEUE_OPTIONS", {})
        for options in [self.options, *self.queue_options.values()]:
            unknown = sorted(set(options) - set(OPTION_DEFAULTS))
            if unknown:
                raise InvalidTask(
                    f"unknown OPTIONS {unknown} for task backend {alias!r}; "
                    f"valid: {', '.join(OPTION_DEFAULTS)}"
                )

    # -- options ---------------------------------------------------------------------------

    def options_for(self, queue_name: str) -> dict[str, Any]:
        """OPTIONS, then the queue's QUEUE_OPTIONS over them, then the defaults under both."""
        return {**OPTION_DEFAULTS, **self.options, **self.queue_options.get(queue_name, {})}

    def job_options(self, queue_name: str) -> dict[str, Any]:
        options = self.options_for(queue_name)
        return {k: options[k] for k in ("max_attempts", "backoff_base", "lease")}

    def result_retention(self, queue_name: str) -> float:
        return float(self.options_for(queue_name)["result_retention"])

    # -- the Tasks API ---------------------------------------------------------------------

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        try:
            validation.queue_name(task.queue_name)
        except InvalidName as exc:
            raise InvalidTask(str(exc)) from None

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        """One job, written in the caller's transaction."""
        self.validate_task(task)
        args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        payload = {"task": task.module_path, "args": args, "kwargs": kwargs,
                   "backend": self.alias}  # fmt: skip
        job = queue(task.queue_name, **self.job_options(task.queue_name)).enqueue(
            payload, run_at=task.run_after, priority=int(task.priority)
        )
        result: TaskResult[Any, Any] = TaskResult(
            task=task, id=str(job.id), status=TaskResultStatus.READY,
            enqueued_at=job.enqueued_at, started_at=None, finished_at=None,
            last_attempted_at=None, args=args, kwargs=kwargs, backend=self.alias,
            errors=[], worker_ids=[],
        )  # fmt: skip
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        try:
            job_id = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        using = get_settings().DATABASE
        now = system_clock()
        job = operations.get_job(using, job_id, now)
        record = (
            TaskResultRecord.objects.using(using)
            .filter(job_id=job_id)
            .exclude(expires_at__lte=now)
            .first()
        )
        return build_result(self.alias, str(result_id), job, record)


def is_task_payload(payload: Any) -> bool:
    return isinstance(payload, dict) and {"task", "args", "kwargs", "backend"} <= set(payload)


def build_result(
    alias: str, result_id: str, job: Job | None, record: TaskResultRecord | None
) -> TaskResult[Any, Any]:
    """A TaskResult from the live job or dead letter (if any) and the result row (if any)."""
    if job is not None and is_task_payload(job.payload):
        task_path, args, kwargs, backend = (job.payload[k] for k in
                                            ("task", "args", "kwargs", "backend"))  # fmt: skip
    elif job is None and record is not None:
        task_path, args, kwargs, backend = (
            record.task_path,
            record.args,
            record.kwargs,
            record.backend,
        )
    else:
        raise TaskResultDoesNotExist(result_id)
    if backend != alias:
        raise TaskResultDoesNotExist(result_id)
    try:
        task = import_string(task_path)
    except ImportError:
        raise TaskResultDoesNotExist(f"{result_id}: task {task_path} cannot be imported") from None
    status = _status(job, record)
    finished_at = None
    if status == TaskResultStatus.FAILED and job is not None:
        finished_at = job.died_at
    elif status in (TaskResultStatus.FAILED, TaskResultStatus.SUCCESSFUL) and record is not None:
        finished_at = record.finished_at
    if job is not None:
        enqueued_at = job.enqueued_at
    else:
        assert record is not None
        enqueued_at = record.enqueued_at
    result: TaskResult[Any, Any] = TaskResult(
        task=task, id=result_id, status=status,
        enqueued_at=enqueued_at,
        started_at=record.started_at if record else None,
        finished_at=finished_at,
        last_attempted_at=record.last_attempted_at if record else None,
        args=args, kwargs=kwargs, backend=backend,
        errors=[TaskError(exception_class_path=e["exception_class_path"],
                          traceback=e["traceback"]) for e in (record.errors if record else [])],
        worker_ids=list(record.worker_ids) if record else [],
    )  # fmt: skip
    if status == TaskResultStatus.SUCCESSFUL and record is not None:
        object.__setattr__(result, "_return_value", record.return_value)
    return result


def _status(job: Job | None, record: TaskResultRecord | None) -> Any:
    """READY (pending, scheduled), RUNNING (claimed), FAILED (dead), else the recorded one."""
    if job is not None:
        if job.state == "dead":
            return TaskResultStatus.FAILED
        return TaskResultStatus.RUNNING if job.state == "claimed" else TaskResultStatus.READY
    assert record is not None
    return TaskResultStatus(record.status)
