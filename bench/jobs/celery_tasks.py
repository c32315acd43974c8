"""Celery 5: the no-op job as a Celery task, and the app it belongs to.

The broker is BENCH_CELERY_BROKER (Redis or RabbitMQ); the result backend is off and results
are ignored. With no result backend nothing records that a job finished, so each job adds
one to a counter in the local Redis (BENCH_CELERY_COUNTER, database 1): the harness polls it
to see the end of a drain. That INCR is the Celery jobs' one write, where the database
queues' jobs write their ack (docs/benchmarks.md says so beside the figures).
"""

from __future__ import annotations

import os
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_init, worker_process_init

from . import noop

QUEUE = "bench"
COUNTER_URL = os.environ.get("BENCH_CELERY_COUNTER", "redis://127.0.0.1:6379/1")
COUNTER_KEY = "bench:celery:done"

app = Celery("bench", broker=os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/0"))
app.conf.update(
    result_backend=None,
    task_ignore_result=True,
    task_default_queue=QUEUE,
    # Documented for short tasks (Celery's "Optimizing" guide): no rate limit bookkeeping.
    worker_disable_rate_limits=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

_counter: redis.Redis | None = None


def counter() -> redis.Redis:
    global _counter
    if _counter is None:
        _counter = redis.Redis.from_url(COUNTER_URL)
    return _counter


@worker_init.connect
@worker_process_init.connect
def _connect_counter(**_: Any) -> None:
    """Open the counter's connection at start: the harness reads it as "worker started"."""
    global _counter
    _counter = None
    counter().ping()


@app.task(name="bench.run", ignore_result=True)
def run(payload: Any) -> None:
    noop(payload)
    counter().incr(COUNTER_KEY)
