"""The no-op consumers of bench/kept_history.py: the same handler on two queues, one that
keeps history (its return value recorded) and one that does not (bench/settings/alkqueue_kept.py
loads them)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django_alkqueue import Job, consumer

KEPT, NOT_KEPT = "bench-kept", "bench-not-kept"


def noop(payload: Any, job: Job) -> dict[str, Any]:
    return {"ok": True, "n": payload["n"]}


consumer(KEPT, keep=timedelta(days=1))(noop)
consumer(NOT_KEPT)(lambda payload, job: noop(payload, job))
