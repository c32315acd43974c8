"""The built-in consumer of task queues: runs a django.tasks task job and keeps its result row.

Each attempt adds its worker id (and, on failure, a TaskError) to the job's result row, so a
TaskResult shows every attempt. The task's own exception is re-raised afterwards: the worker's
executor then retries or dead-letters the job like any other.
"""

from __future__ import annotations

import traceback
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from .backend import (
    OPTION_DEFAULTS,
    AlkQueueBackend,
    build_result,
    stored_run_after,
    task_context,
)
from .backoff import RetryPolicy
from .clock import system_clock
from .conf import get_settings
from .consumers import ConsumerSpec
from .error_text import capped, private_error_text
from .jobs import Job
from .models import DeadLetter, QueueMessage
from .models import TaskResult as TaskResultRecord
from .outcomes import Fail
from .payload import kept_value
from .privacy import is_sensitive
from .signals import announce
from .tasks_compat import (
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)
from .validation import storable_copy

HANDLER_PATH = "django_alkqueue.task_runner.run_task_job"


def run_task_job(payload: Any, job: Job) -> Any:
    """Run the task; returns its return value (normalised to JSON, NUL characters and
    unpaired surrogates escaped: payload.kept_value), which the history records when the
    queue keeps (ALKQUEUE["QUEUES"][name]["keep"])."""
    backend = task_backends[payload["backend"]]
    task = import_string(payload["task"])
    # Result rows live beside the jobs the backend enqueues, where get_result reads them.
    using = get_settings().DATABASE
    now = system_clock()
    record = _start_attempt(using, job, payload, now)
    result = build_result(backend.alias, str(job.id), job, record)
    announce(task_started, type(backend), task_result=result)
    try:
        if task.takes_context:
            context = task_context(result, job)
            value = task.call(context, *payload["args"], **payload["kwargs"])
        else:
            value = task.call(*payload["args"], **payload["kwargs"])
        value = kept_value(normalize_json(value), "the task's return value")
    except (Exception, SystemExit) as error:
        # Fail dead-letters at once; any other error only on the last attempt.
        final = isinstance(error, Fail) or job.attempts >= job.max_attempts
        _record_failure(record, error, system_clock(), final, backend)
        if final:
            _announce_finished(backend, result, record)
        raise
    _record_success(record, value, system_clock(), backend)
    _announce_finished(backend, result, record)
    return value


def _start_attempt(
    using: str, job: Job, payload: dict[str, Any], now: datetime
) -> TaskResultRecord:
    rows = TaskResultRecord.objects.using(using)
    # A requeued job reuses the row its earlier run left: open it again first, so that
    # neither get_result nor the sweeper takes it for an expired result while this attempt
    # runs (the sweeper's DELETE matches only rows with an expiry).
    rows.filter(job_id=job.id).update(expires_at=None, finished_at=None)
    record, _ = rows.get_or_create(
        job_id=job.id,
        defaults={
            "backend": payload["backend"], "task_path": payload["task"], "queue": job.queue,
            "priority": job.priority, "run_after": stored_run_after(payload),
            "status": TaskResultStatus.RUNNING, "args": payload["args"],
            "kwargs": payload["kwargs"], "enqueued_at": job.enqueued_at, "started_at": now,
        },
    )  # fmt: skip
    record.status = TaskResultStatus.RUNNING
    record.started_at = record.started_at or now
    record.last_attempted_at = now
    record.worker_ids = [*record.worker_ids, job.claimed_by or ""]
    record.save(update_fields=["status", "started_at", "last_attempted_at", "worker_ids"])
    return record


def _record_failure(
    record: TaskResultRecord, error: BaseException, now: datetime, final: bool, backend: Any
) -> None:
    kind = type(error)
    record.errors = [
        *record.errors,
        {
            "exception_class_path": storable_copy(f"{kind.__module__}.{kind.__qualname__}"),
            "traceback": capped(storable_copy(_traceback_text(error, record.queue))),
        },
    ]
    record.status = TaskResultStatus.FAILED if final else TaskResultStatus.READY
    if final:
        record.finished_at = now
        record.expires_at = now + timedelta(seconds=backend.result_retention(record.queue))
    record.save(update_fields=["errors", "status", "finished_at", "expires_at"])


def _traceback_text(error: BaseException, queue: str) -> str:
    """The traceback a task result stores; a sensitive queue's withholds the messages."""
    if is_sensitive(queue):
        return private_error_text(error)
    return "".join(traceback.format_exception(error))


def _record_success(record: TaskResultRecord, value: Any, now: datetime, backend: Any) -> None:
    record.status = TaskResultStatus.SUCCESSFUL
    record.return_value = value
    record.finished_at = now
    record.expires_at = now + timedelta(seconds=backend.result_retention(record.queue))
    record.save(update_fields=["status", "return_value", "finished_at", "expires_at"])


def _announce_finished(
    backend: Any, started: TaskResult[Any, Any], record: TaskResultRecord
) -> None:
    # The job is still live here (its ack or dead letter follows), so build from the record,
    # with the task as enqueued.
    result = build_result(backend.alias, started.id, None, record, task=started.task)
    announce(task_finished, type(backend), task_result=result)


def close_orphaned_results(using: str, now: datetime) -> int:
    """Result rows whose job left without the task runner closing them (a crash on the last
    attempt that reclaim dead-lettered, a cancel, a purge): FAILED with the dead letter's
    time when there is one, else deleted. Returns how many were closed. Only rows still
    open (no expiry) are looked at: the tasks in progress."""
    open_rows = TaskResultRecord.objects.using(using).filter(expires_at__isnull=True)
    live = QueueMessage.objects.using(using).values("id")
    orphans = list(open_rows.exclude(job_id__in=live))
    died = dict(
        DeadLetter.objects.using(using)
        .filter(job_id__in=[r.job_id for r in orphans])
        .values_list("job_id", "died_at")
    )
    for record in orphans:
        died_at = died.get(record.job_id)
        if died_at is None:
            record.delete()
            continue
        retention = _retention(record)
        record.status = TaskResultStatus.FAILED
        record.finished_at = died_at
        record.expires_at = max(died_at + timedelta(seconds=retention), now)
        record.save(update_fields=["status", "finished_at", "expires_at"])
    return len(orphans)


def _retention(record: TaskResultRecord) -> float:
    try:
        backend = task_backends[record.backend]
    except Exception:  # the backend left the settings: keep the result a day
        return float(OPTION_DEFAULTS["result_retention"])
    if isinstance(backend, AlkQueueBackend):
        return backend.result_retention(record.queue)
    return float(OPTION_DEFAULTS["result_retention"])


# -- which queues are task queues ------------------------------------------------------------


def alk_backends() -> list[AlkQueueBackend]:
    tasks = getattr(settings, "TASKS", {}) or {}
    backends = [task_backends[alias] for alias in tasks]
    return [backend for backend in backends if isinstance(backend, AlkQueueBackend)]


def task_queue_spec(queue_name: str) -> ConsumerSpec | None:
    """The built-in consumer of `queue_name` if an alkqueue task backend serves it."""
    for backend in alk_backends():
        if not backend.queues or queue_name in backend.queues:
            options = backend.job_options(queue_name)
            return ConsumerSpec(
                queue=queue_name,
                handler=run_task_job,
                path=HANDLER_PATH,
                lease=float(options["lease"]),
                max_attempts=int(options["max_attempts"]),
                retry=RetryPolicy(base=float(options["backoff_base"])),
                atomic=False,
                timeout=task_queue_timeout(queue_name),
            )
    return None


def task_queue_timeout(queue_name: str) -> float | None:
    """ALKQUEUE["QUEUES"][name]["timeout"]: a task queue's time limit, None when unset."""
    timeout = get_settings().QUEUES.get(queue_name, {}).get("timeout")
    return None if timeout is None else float(timeout)


def declared_task_queues() -> list[str]:
    """Queues named in an alkqueue backend's QUEUES (a backend with [] serves any name)."""
    return sorted({name for backend in alk_backends() for name in backend.queues})
