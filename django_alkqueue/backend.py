"""The django.tasks backend: plain `@task` code runs on django-alkqueue.

A task becomes one live job whose payload names the task, its arguments and the backend
alias; `alk_worker` runs it with the built-in task consumer (task_runner.py). Results are
assembled from the live job or its dead letter and the task's result row (models.TaskResult).
"""

from __future__ import annotations

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

# alkqueue.E102: checked before the models are imported, whose own error would not say what
# to do. Django's task check imports each configured backend, so `manage.py check` stops here.
if not apps.is_installed("django_alkqueue"):
    raise ImproperlyConfigured(
        "alkqueue.E102: a TASKS backend is django_alkqueue.backend.AlkQueueBackend, but "
        '"django_alkqueue" is not in INSTALLED_APPS. Add it, then run migrate. '
        "See docs/checks.md#alkqueuee102."
    )

import dataclasses
import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from . import defaults, operations, validation
from .clock import system_clock
from .conf import get_settings
from .exceptions import InvalidName, InvalidOption
from .jobs import HISTORY_STATES, Job
from .models import TaskResult as TaskResultRecord
from .payload import refuse_nul
from .queues import queue
from .running import Run, RunningJob, running_job
from .tasks_compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)

OPTION_DEFAULTS: dict[str, Any] = {
    "max_attempts": defaults.MAX_ATTEMPTS,
    "backoff_base": defaults.BACKOFF_BASE,
    "lease": defaults.LEASE,
    "result_retention": defaults.RESULT_RETENTION,
}

#: A result id is a job id written the one canonical way: a positive decimal without sign,
#: leading zeros, spaces, underscores or non-ASCII digits, at most a signed 64-bit integer.
_RESULT_ID = re.compile(r"[1-9][0-9]{0,18}")


# The stubs declare TaskContext generic and not frozen; Django's own is frozen, with slots.
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AlkQueueTaskContext(TaskContext):  # type: ignore[type-arg,misc]
    """The `context` a `takes_context=True` task gets when django-alkqueue runs it: Django's
    TaskContext (`task_result`, `attempt`) plus `job`, the running job, whose durable steps
    (`context.job.step(name, fn, ...)`), progress, cancel flag and deadline a task may use
    as a `@consumer` handler does (docs/tasks.md, "Durable steps")."""

    job: RunningJob


def task_context(task_result: TaskResult[Any, Any], job: Job) -> AlkQueueTaskContext:
    """The context of a task run as `job`: a job no worker runs (a Job, not a RunningJob)
    gets one whose steps refuse, with why."""
    running = job if isinstance(job, RunningJob) else running_job(job, Run())
    return AlkQueueTaskContext(task_result=task_result, job=running)


class AlkQueueBackend(BaseTaskBackend):
    supports_defer = True
    supports_priority = True
    supports_get_result = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.options, self.queue_options = split_queue_options(alias, params)
        for options in [self.options, *self.queue_options.values()]:
            check_options(alias, options)

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
        if task.run_after is not None:
            # The core's own run_at rules, so that what passes here also enqueues.
            try:
                validation.run_at(task.run_after, system_clock())
            except InvalidOption as exc:
                raise InvalidTask(f"run_after: {exc}") from None

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        """One job, written in the caller's transaction."""
        self.validate_task(task)
        args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        # The task's result row keeps them in jsonb columns (task_runner.py), which refuse NUL.
        refuse_nul(args, "args")
        refuse_nul(kwargs, "kwargs")
        payload = {"task": task.module_path, "args": args, "kwargs": kwargs,
                   "backend": self.alias}  # fmt: skip
        if task.run_after is not None:  # the job's run_at moves with retries; this does not
            payload["run_after"] = task.run_after.isoformat()
        job = queue(task.queue_name, **self.job_options(task.queue_name)).enqueue(
            payload, run_at=task.run_after, priority=int(task.priority)
        )
        result: TaskResult[Any, Any] = StoredTaskResult(
            task=task, id=str(job.id), status=TaskResultStatus.READY,
            enqueued_at=job.enqueued_at, started_at=None, finished_at=None,
            last_attempted_at=None, args=args, kwargs=kwargs, backend=self.alias,
            errors=[], worker_ids=[],
        )  # fmt: skip
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        job_id = parse_result_id(result_id)
        using = get_settings().DATABASE
        now = system_clock()
        job = operations.get_job(using, job_id, now)
        if job is not None and job.state in HISTORY_STATES:
            job = None  # a job in the history has finished: its result row tells the rest
        record = (
            TaskResultRecord.objects.using(using)
            .filter(job_id=job_id)
            .exclude(expires_at__lte=now)
            .first()
        )
        return build_result(self.alias, str(result_id), job, record)


#: How each option is checked, so that a bad value fails when the backend is built rather
#: than at the first enqueue (or, for result_retention, in the worker).
OPTION_RULES: dict[str, Callable[[Any], Any]] = {
    "max_attempts": validation.max_attempts,
    "backoff_base": lambda value: validation.seconds(value, "backoff_base"),
    "lease": lambda value: validation.seconds(value, "lease", positive=True),
    "result_retention": lambda value: validation.seconds(value, "result_retention"),
}


def check_options(alias: str, options: dict[str, Any]) -> None:
    """InvalidTask for an unknown option or a bad value of a known one."""
    unknown = sorted(set(options) - set(OPTION_DEFAULTS), key=repr)
    if unknown:
        raise InvalidTask(
            f"unknown OPTIONS {unknown} for task backend {alias!r}; "
            f"valid: {', '.join(OPTION_DEFAULTS)}"
        )
    for name, value in options.items():
        try:
            OPTION_RULES[name](value)
        except InvalidOption as exc:
            raise InvalidTask(f"task backend {alias!r}: {exc}") from None


def _mapping(alias: str, value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidTask(
            f"task backend {alias!r}: {what} must be a dict, not "
            f"{validation.shown(value, repr, 80)}"
        )
    return dict(value)


def split_queue_options(
    alias: str, params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """OPTIONS without QUEUE_OPTIONS, and QUEUE_OPTIONS from beside OPTIONS or inside it."""
    options = _mapping(alias, params.get("OPTIONS", {}), "OPTIONS")
    inside = options.pop("QUEUE_OPTIONS", None)
    beside = params.get("QUEUE_OPTIONS")
    if inside is not None and beside is not None:
        raise InvalidTask(
            f"task backend {alias!r} has QUEUE_OPTIONS both beside OPTIONS and inside it; "
            "give it in one place"
        )
    per_queue = _mapping(alias, inside if inside is not None else beside or {}, "QUEUE_OPTIONS")
    for name, queue_options in per_queue.items():
        per_queue[name] = _mapping(alias, queue_options, f"QUEUE_OPTIONS[{name!r}]")
    return options, per_queue


def parse_result_id(result_id: Any) -> int:
    """The job id behind `result_id`; only its canonical form names it, so that a result has
    one id (`get_result(" 10 ")` is not job 10's result)."""
    if not isinstance(result_id, str) or not _RESULT_ID.fullmatch(result_id):
        raise TaskResultDoesNotExist(result_id)
    job_id = int(result_id)
    if job_id > validation.MAX_JOB_ID:
        raise TaskResultDoesNotExist(result_id)
    return job_id


def is_task_payload(payload: Any) -> bool:
    return isinstance(payload, dict) and {"task", "args", "kwargs", "backend"} <= set(payload)


def stored_run_after(payload: dict[str, Any]) -> datetime | None:
    """The run_after a task was enqueued with; the job's run_at moves with retries."""
    return datetime.fromisoformat(payload["run_after"]) if payload.get("run_after") else None


@dataclasses.dataclass(frozen=True)
class Enqueued:
    """What a task was enqueued with, as stored: by the live job or dead letter (payload,
    queue, priority), else by the result row."""

    task_path: str
    args: Any
    kwargs: Any
    backend: str
    queue_name: str
    #: None: not stored; the task's own.
    priority: int | None
    run_after: datetime | None

    @classmethod
    def of(cls, job: Job | None, record: TaskResultRecord | None) -> Enqueued | None:
        if job is not None and is_task_payload(job.payload):
            p = job.payload
            return cls(p["task"], p["args"], p["kwargs"], p["backend"], job.queue,
                       job.priority, stored_run_after(p))  # fmt: skip
        if job is None and record is not None:
            return cls(record.task_path, record.args, record.kwargs, record.backend,
                       record.queue, record.priority, record.run_after)  # fmt: skip
        return None


if TYPE_CHECKING:  # generic in the stubs and in the backport, not in Django 6
    _TaskBase = Task[Any, Any]
    _TaskResultBase = TaskResult[Any, Any]
else:
    _TaskBase, _TaskResultBase = Task, TaskResult


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EnqueuedTask(_TaskBase):
    """A task as it was enqueued, which today's settings may refuse (its queue left QUEUES):
    a result still describes what was enqueued, so it is not validated again."""

    def __post_init__(self) -> None:
        """No validation: Task's own would refuse what the settings no longer allow."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredTaskResult(_TaskResultBase):  # type: ignore[misc]  # frozen in Django, not in the stubs
    """The TaskResult this backend returns: Django's, with the stored return value given to
    the constructor (`stored_return_value`), where Django's own field for it is private."""

    stored_return_value: Any = None

    @property
    def return_value(self) -> Any:
        """The task's return value; ValueError unless it succeeded, as Django's."""
        if self.status == TaskResultStatus.SUCCESSFUL:
            return self.stored_return_value
        # Two-argument super(): a slots dataclass is a new class, which zero-argument misses.
        return super(StoredTaskResult, self).return_value  # Django's ValueError

    def refresh(self) -> None:
        """Reload the result's state from the backend, as Django's refresh() does."""
        self._take(self.task.get_backend().get_result(self.id))

    async def arefresh(self) -> None:
        """refresh() from async code."""
        self._take(await self.task.get_backend().aget_result(self.id))

    def _take(self, fresh: TaskResult[Any, Any]) -> None:
        # What Django's refresh() copies, set as a frozen dataclass sets its own fields.
        for name in _REFRESHED:
            object.__setattr__(self, name, getattr(fresh, name))


#: The fields of a result that change while its task runs (Django's refresh() copies them).
_REFRESHED = ("status", "enqueued_at", "started_at", "finished_at", "last_attempted_at",
              "errors", "worker_ids", "stored_return_value")  # fmt: skip


def task_as_enqueued(result_id: str, enqueued: Enqueued) -> Task[Any, Any]:
    """The task with the `using()` overrides it was enqueued with, so that `result.task`
    equals the enqueued task and `result.refresh()` asks the backend that holds it."""
    try:
        task = import_string(enqueued.task_path)
    except ImportError:
        raise TaskResultDoesNotExist(
            f"{result_id}: task {enqueued.task_path} cannot be imported"
        ) from None
    changes = {"backend": enqueued.backend, "queue_name": enqueued.queue_name,
               "priority": enqueued.priority, "run_after": enqueued.run_after}  # fmt: skip
    try:
        return task.using(**changes)  # type: ignore[no-any-return]
    except InvalidTask:
        # The settings changed since the enqueue (its queue left QUEUES, say): the result
        # still describes what was enqueued, so skip the validation a new task would get.
        fields = {field.name: getattr(task, field.name) for field in dataclasses.fields(task)}
        fields.update((name, value) for name, value in changes.items() if value is not None)
        return EnqueuedTask(**fields)


def build_result(
    alias: str,
    result_id: str,
    job: Job | None,
    record: TaskResultRecord | None,
    task: Task[Any, Any] | None = None,
) -> TaskResult[Any, Any]:
    """A TaskResult from the live job or dead letter (if any) and the result row (if any).
    `task`: the enqueued task when the caller has it already (else rebuilt from storage)."""
    enqueued = Enqueued.of(job, record)
    if enqueued is None or enqueued.backend != alias:
        raise TaskResultDoesNotExist(result_id)
    if task is None:
        task = task_as_enqueued(result_id, enqueued)
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
    stored = record.return_value if status == TaskResultStatus.SUCCESSFUL and record else None
    return StoredTaskResult(
        task=task, id=result_id, status=status,
        enqueued_at=enqueued_at,
        started_at=record.started_at if record else None,
        finished_at=finished_at,
        last_attempted_at=record.last_attempted_at if record else None,
        args=enqueued.args, kwargs=enqueued.kwargs, backend=enqueued.backend,
        errors=[TaskError(exception_class_path=e["exception_class_path"],
                          traceback=e["traceback"]) for e in (record.errors if record else [])],
        worker_ids=list(record.worker_ids) if record else [],
        stored_return_value=stored,
    )  # fmt: skip


def _status(job: Job | None, record: TaskResultRecord | None) -> Any:
    """READY (pending, scheduled), RUNNING (claimed), FAILED (dead), else the recorded one."""
    if job is not None:
        if job.state == "dead":
            return TaskResultStatus.FAILED
        return TaskResultStatus.RUNNING if job.state == "claimed" else TaskResultStatus.READY
    assert record is not None
    return TaskResultStatus(record.status)
