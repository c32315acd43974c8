"""The queues of the Django Tasks backend, where a Tasks framework is installed: which queues
alkqueue task backends declare, the consumer that runs a task queue's jobs, and the repair
of task results a crash left running. Without one (Django 5.2 without the django-tasks
backport) there are none, and nothing else needs to know."""

from __future__ import annotations

from datetime import datetime
from types import ModuleType

from .consumers import ConsumerSpec

try:
    from . import task_runner
except ImportError:  # optional: no Tasks framework installed (tasks_compat.py)
    RUNNER: ModuleType | None = None
else:
    RUNNER = task_runner


def declared() -> list[str]:
    """Queues named in an alkqueue backend's QUEUES; none without a Tasks framework."""
    return RUNNER.declared_task_queues() if RUNNER is not None else []


def spec(name: str) -> ConsumerSpec | None:
    """The task consumer of queue `name`, if it is a task queue."""
    return RUNNER.task_queue_spec(name) if RUNNER is not None else None


def close_orphaned_results(using: str, now: datetime) -> None:
    """Close the task results whose job is gone (task_runner.close_orphaned_results)."""
    if RUNNER is not None:
        RUNNER.close_orphaned_results(using, now)
