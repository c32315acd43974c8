"""Celery 5, with no database: the Redis broker (the local redis-server) or RabbitMQ (the
local server, guest/guest), the prefork or the threads pool, result backend off. `delay` for
one job; Celery has no bulk enqueue, so the bulk figure is `group(...).apply_async()`, which
publishes one message per job over one connection. Worker: `celery worker -P POOL -c C
--prefetch-multiplier M --without-gossip --without-mingle --without-heartbeat`.

A drain's jobs are made visible at once the way a broker allows it: the workers' consumers
are cancelled (`control.cancel_consumer`, waiting for their replies), the jobs published,
then the consumers added back (`control.add_consumer`, not waiting: the clock starts before
any worker can start). The end of a drain is the jobs' counter in Redis reaching the number
sent (bench/jobs/celery_tasks.py). Nothing here is transactional with a database: a job is
published whatever the caller's transaction does afterwards.
"""

from __future__ import annotations

import time
from importlib import metadata
from typing import Any

import psycopg

from . import Config, NotSupported, System

REDIS_BROKER = "redis://127.0.0.1:6379/0"
RABBITMQ_BROKER = "amqp://guest:guest@127.0.0.1:5672//"


class CeleryBase(System):
    broker = ""
    pool = ""
    #: (concurrency, prefetch multiplier): the first is the quick run's; the scan raises the
    #: prefetch (and the threads) until it stops helping (docs/benchmarks.md, the scan).
    scan: tuple[tuple[int, int], ...] = ()
    expected = 0
    processes = 1

    def install(self) -> None:
        from bench.jobs.celery_tasks import app

        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=3)
        self.reset()

    def versions(self) -> dict[str, str]:
        return {name: metadata.version(name) for name in ("celery", "kombu", "redis", "amqp")}

    def env(self, **extra: str) -> dict[str, str]:
        return super().env(BENCH_CELERY_BROKER=self.broker, **extra)

    def reset(self) -> None:
        from bench.jobs.celery_tasks import COUNTER_KEY, app, counter

        app.control.purge()
        counter().set(COUNTER_KEY, 0)
        self.expected = 0

    def reconnect(self) -> None:
        pass

    # -- enqueue ---------------------------------------------------------------------------

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        from bench.jobs.celery_tasks import run

        run.delay(payload)
        self.expected += 1

    def enqueue_bulk(self, payloads: list[dict[str, Any]]) -> None:
        from celery import group

        from bench.jobs.celery_tasks import run

        group(run.s(p) for p in payloads).apply_async()
        self.expected += len(payloads)

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        from bench.jobs.celery_tasks import QUEUE, app

        # Right after start a worker may not listen to the broadcasts yet: ask again.
        deadline = time.monotonic() + 60
        answered: set[str] = set()
        while len(answered) < self.processes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"cancel_consumer: {len(answered)} worker(s) answered")
            replies = app.control.cancel_consumer(
                QUEUE, reply=True, timeout=1.0, limit=self.processes - len(answered)
            )
            answered.update(name for reply in replies for name in reply)
        self.enqueue_bulk(payloads)
        app.control.add_consumer(QUEUE, reply=False)

    # -- workers ---------------------------------------------------------------------------

    def configs(self, quick: bool) -> list[Config]:
        def cfg(c: int, m: int) -> Config:
            label = f"-P {self.pool} -c {c} --prefetch-multiplier {m}"
            return Config(label, {"pool": self.pool, "concurrency": c, "prefetch_multiplier": m})

        chosen = self.scan[:1] if quick else self.scan
        return [cfg(c, m) for c, m in chosen]

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        from bench import common

        o = config.options
        self.processes = processes
        return [[common.PYTHON, "-m", "celery", "-A", "bench.jobs.celery_tasks", "worker",
                 "-Q", "bench", "-P", o["pool"], "-c", str(o["concurrency"]),
                 "--prefetch-multiplier", str(o["prefetch_multiplier"]),
                 "-n", f"bench{i}@%h", "-l", "WARNING",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"]
                for i in range(processes)]  # fmt: skip

    def worker_env(self, config: Config, **extra: str) -> dict[str, str]:
        return self.env(**extra)

    def unfinished(self, conn: psycopg.Connection[Any]) -> bool:
        return self.unfinished_count(conn) > 0

    def unfinished_count(self, conn: psycopg.Connection[Any]) -> int:
        from bench.jobs.celery_tasks import COUNTER_KEY, counter

        return self.expected - int(counter().get(COUNTER_KEY) or 0)

    def poll_backend_pid(self, conn: psycopg.Connection[Any]) -> int:
        return -1  # the polls read Redis, whose CPU is the server figure of the Redis broker


class CeleryRedisPrefork(CeleryBase):
    name = "celery_redis_prefork"
    title = "Celery (Redis, prefork)"
    broker = REDIS_BROKER
    pool = "prefork"
    server_process = "redis-server"
    server_port = 6379
    scan = ((2, 64), (2, 4), (2, 16), (2, 256), (4, 64), (4, 256))


class CeleryRedisThreads(CeleryRedisPrefork):
    name = "celery_redis_threads"
    title = "Celery (Redis, threads)"
    pool = "threads"
    scan = ((8, 64), (4, 4), (4, 64), (8, 256), (16, 64), (16, 256))


class CeleryRabbitPrefork(CeleryRedisPrefork):
    name = "celery_rabbitmq_prefork"
    title = "Celery (RabbitMQ, prefork)"
    broker = RABBITMQ_BROKER
    server_process = "beam.smp"


class CeleryRabbitThreads(CeleryRedisThreads):
    name = "celery_rabbitmq_threads"
    title = "Celery (RabbitMQ, threads)"
    broker = RABBITMQ_BROKER
    server_process = "beam.smp"


__all__ = ["CeleryRabbitPrefork", "CeleryRabbitThreads", "CeleryRedisPrefork",
           "CeleryRedisThreads", "NotSupported"]  # fmt: skip
