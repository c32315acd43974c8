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
    UnsupportedDatabase,
)
from .jobs import Job, QueueStats
from .outcomes import Fail, Retry, Snooze

if TYPE_CHECKING:
    from .queues import JobHandle, Queue, aenqueue, enqueue, queue

__all__ = [
    "AlkQueueError",
    "Fail",
    "InvalidName",
    "InvalidOption",
    "Job",
    "JobHandle",
    "PayloadError",
    "Queue",
    "QueueStats",
    "Retry",
    "RetryPolicy",
    "Snooze",
    "UnsupportedDatabase",
    "aenqueue",
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
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'django_alkqueue' has no attribute {name!r}")
