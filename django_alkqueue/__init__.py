"""django-alkqueue: a durable job queue in your Django project's own database.

The public API. Names are imported on first use, so that listing "django_alkqueue" in
INSTALLED_APPS does not import the models before Django's app registry is ready.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .backoff import RetryPolicy
from .consumers import consumer
from .exceptions import (
    AlkQueueError,
    InvalidName,
    InvalidOption,
    PayloadError,
    TimeLimitExceeded,
    TransactionLeftOpen,
    UnsupportedDatabase,
    WaitTimedOut,
    WorkerChildDied,
)
from .jobs import Job, Progress, QueueStats
from .outcomes import Cancelled, Fail, Retry, Snooze

if TYPE_CHECKING:
    from .queues import JobHandle, Queue, aenqueue, enqueue, queue
    from .workflows.batches import batch
    from .workflows.chains import chain
    from .workflows.specs import JobSpec

__all__ = [
    "AlkQueueError",
    "Cancelled",
    "Fail",
    "InvalidName",
    "InvalidOption",
    "Job",
    "JobHandle",
    "JobSpec",
    "PayloadError",
    "Progress",
    "Queue",
    "QueueStats",
    "Retry",
    "RetryPolicy",
    "Snooze",
    "TimeLimitExceeded",
    "TransactionLeftOpen",
    "UnsupportedDatabase",
    "WaitTimedOut",
    "WorkerChildDied",
    "aenqueue",
    "batch",
    "chain",
    "consumer",
    "enqueue",
    "queue",
]

_LAZY = {
    "Queue": "django_alkqueue.queues",
    "JobHandle": "django_alkqueue.queues",
    "queue": "django_alkqueue.queues",
    "enqueue": "django_alkqueue.queues",
    "aenqueue": "django_alkqueue.queues",
    "batch": "django_alkqueue.workflows.batches",
    "chain": "django_alkqueue.workflows.chains",
    "JobSpec": "django_alkqueue.workflows.specs",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'django_alkqueue' has no attribute {name!r}")
