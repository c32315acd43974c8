"""django-vtasks with its database backend; worker `runworker`.

VTASKS_CONCURRENCY comes from the worker's --concurrency; the "bench_batch" queue uses vtasks'
batching option with BENCH_VTASKS_BATCH tasks per fetch (default 100)."""

import os

from .base import *  # noqa: F403
from .base import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_vtasks", "django_vtasks.db"]
TASKS = {"default": {"BACKEND": "django_vtasks.backends.db.DatabaseTaskBackend",
                     "QUEUES": ["bench", "bench_batch"]}}  # fmt: skip
VTASKS_QUEUES = {
    "bench": {},
    "bench_batch": {
        "batch": {"count": int(os.environ.get("BENCH_VTASKS_BATCH", "100")), "timeout": 1.0}
    },
}
