"""The driver's hot paths through the public API, timed in this process: a single enqueue()
in autocommit, a batch claim + ack_batch of 100 jobs at a time, and enqueue_many of 20,000.
Each figure is given as wall time and as this process's CPU time per job: on a shared
machine the CPU time moves less with the other load. Used to compare two commits of the
PostgreSQL driver (docs/benchmarks.md, "The driver's hot path").

    DATABASE_URL=postgres://root@127.0.0.1:5432/alk_hot_path python -m bench.hot_path
"""

from __future__ import annotations

import os
import time

import django
import psycopg

URL = os.environ.setdefault("DATABASE_URL", "postgres://root@127.0.0.1:5432/alk_hot_path")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
# DEBUG logs every query, and then the hot statements go through Django's own cursor.
os.environ.setdefault("DJANGO_DEBUG", "0")

SINGLE = 3_000
BATCH, ROUNDS = 100, 200
BULK = 20_000


class Timer:
    """Wall and process CPU time per job, in microseconds, of the block it times."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = (time.perf_counter() - self.wall) / self.jobs * 1e6
        self.cpu = (time.process_time() - self.cpu) / self.jobs * 1e6

    def __str__(self) -> str:
        return f"{self.wall:.1f} us wall, {self.cpu:.1f} us CPU"


def _database() -> None:
    name = URL.rsplit("/", 1)[1]
    with psycopg.connect(URL.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup() -> None:
    """The database made and migrated, Django set up."""
    _database()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main() -> None:
    setup()
    from django_alkqueue import queue
    from django_alkqueue.models import QueueMessage

    q = queue("hot-path")
    QueueMessage.objects.filter(queue="hot-path").delete()
    for _ in range(200):  # warm: prepared statements, caches
        q.enqueue({"n": 1})
    with Timer(SINGLE) as single:
        for i in range(SINGLE):
            q.enqueue({"n": i})
    QueueMessage.objects.filter(queue="hot-path").delete()
    q.enqueue_many([{"n": i} for i in range(BATCH * (ROUNDS + 20))])
    for _ in range(20):
        q.ack_batch([h.job.id for h in q.claim("w", BATCH)])
    with Timer(ROUNDS * BATCH) as batch:
        for _ in range(ROUNDS):
            q.ack_batch([h.job.id for h in q.claim("w", BATCH)])
    QueueMessage.objects.filter(queue="hot-path").delete()
    payloads = [{"n": i, "user": "alice@example.com"} for i in range(BULK)]
    with Timer(BULK) as bulk:
        q.enqueue_many(payloads)
    QueueMessage.objects.filter(queue="hot-path").delete()
    print(f"single enqueue: {single}; claim+ack_batch of {BATCH}: {batch}; "
          f"enqueue_many of {BULK}: {bulk}")  # fmt: skip


if __name__ == "__main__":
    main()
