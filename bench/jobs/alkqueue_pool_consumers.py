"""The no-op consumer of the process-pool bench (bench/process_pool.py)."""

from __future__ import annotations

from typing import Any

from django_alkqueue import consumer

QUEUE = "pool-noop"


@consumer(QUEUE)
def noop(payload: Any, job: Any) -> None:
    return None
