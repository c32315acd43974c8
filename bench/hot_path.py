"""The two hot paths through the public API, timed in this process: a single enqueue() in
autocommit, and a batch claim + ack_batch of 100 jobs at a time. Used to compare two commits
of the PostgreSQL driver (docs/benchmarks.md, "The driver's hot path").

    DATABASE_URL=postgres://root@127.0.0.1:5432/alk_hot_path python -m bench.hot_path
"""

from __future__ import annotations

import os
import time

import django
import psycopg

URL = os.environ.setdefault("DATABASE_URL", "postgres://root@127.0.0.1:5432/alk_hot_path")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")

SINGLE = 3_000
BATCH, ROUNDS = 100, 200


def _database() -> None:
    name = URL.rsplit("/", 1)[1]
    with psycopg.connect(URL.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    _database()
    django.setup()
    from django.core.management import call_command

    from django_alkqueue import queue
    from django_alkqueue.models import QueueMessage

    call_command("migrate", verbosity=0)
    q = queue("hot-path")
    QueueMessage.objects.filter(queue="hot-path").delete()
    for _ in range(200):  # warm: prepared statements, caches
        q.enqueue({"n": 1})
    start = time.perf_counter()
    for i in range(SINGLE):
        q.enqueue({"n": i})
    single = (time.perf_counter() - start) / SINGLE * 1e6
    QueueMessage.objects.filter(queue="hot-path").delete()
    q.enqueue_many([{"n": i} for i in range(BATCH * (ROUNDS + 20))])
    for _ in range(20):
        q.ack_batch([h.job.id for h in q.claim("w", BATCH)])
    start = time.perf_counter()
    for _ in range(ROUNDS):
        q.ack_batch([h.job.id for h in q.claim("w", BATCH)])
    batch = (time.perf_counter() - start) / (ROUNDS * BATCH) * 1e6
    print(f"single enqueue {single:.0f} us/job; claim+ack_batch of {BATCH} {batch:.1f} us/job")


if __name__ == "__main__":
    main()
