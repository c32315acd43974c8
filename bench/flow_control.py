"""Flow control's four speed figures (issue 34), each a ratio or a bound read within one run:

1. claim+ack cost per job of a queue with `concurrency` set and of one with
   `key_concurrency=1` over 1,000 keys, against the same loop on a queue without limits, at
   claim sizes 1 and 100 (target: within 2x);
2. a drain of N no-op jobs over 1,000 keys with `key_concurrency=1` by 2 worker processes,
   against the same drain without limits (target: at least 50% of its rate);
3. `concurrency=8` served by 2 processes x 16 threads running 10 ms sleeps: the share of the
   cap kept busy (target: at least 95%) and the most live claims at once (never above 8);
4. `rate="2000/s"`: the claims per second achieved (target: 1,800-2,000) and the most claims
   in any 1 s window (never above 2,000).

    python -m bench.flow_control [--quick]

Run by `make bench` and `make bench-quick` after bench.run, in a database of its own
(PREFIX + "flow"); writes results/flow-MODE.json. Public APIs only, as the rest of the bench:
`@consumer`, `queue()`, `Queue.enqueue_many` / `claim` / `ack_batch`, `JobHandle.ack`,
`alk_worker`, and the models to count what is left.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SERVER = os.environ.get("BENCH_PG_URL", "postgres://root@127.0.0.1:5432")
KEYS = 1_000


def _database(quick: bool) -> str:
    prefix = os.environ.get("BENCH_DB_PREFIX", "bench_quick_" if quick else "bench_")
    return f"{prefix}flow"


def _fresh_database(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _setup(url: str) -> None:
    os.environ["BENCH_DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings.alkqueue_flow"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connection

    from bench.jobs.alkqueue_flow_consumers import RUNS

    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {RUNS} (job_id BIGINT, claimed_at DOUBLE PRECISION, "
            "started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION)"
        )


def _empty(queue_name: str) -> None:
    from django.db import connection

    from bench.jobs.alkqueue_flow_consumers import RUNS
    from django_alkqueue.models import QueueMessage

    QueueMessage.objects.filter(queue=queue_name).delete()
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {RUNS}")


# -- 1. claim+ack cost in one process ------------------------------------------------------


def claim_ack_seconds_per_job(queue_name: str, jobs: int, size: int) -> float:
    from django_alkqueue import queue

    q = queue(queue_name)
    _empty(queue_name)
    q.enqueue_many([{"i": i} for i in range(jobs)], concurrency_key=lambda p: f"k{p['i'] % KEYS}")
    done = 0
    started = time.perf_counter()
    while done < jobs:
        handles = q.claim("bench", size)
        if not handles:
            raise RuntimeError(f"{queue_name}: claim came back empty at {done} of {jobs}")
        if size == 1:
            handles[0].ack()
        else:
            q.ack_batch([h.job.id for h in handles])
        done += len(handles)
    return (time.perf_counter() - started) / jobs


def claim_ack(quick: bool) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for size in (1, 100):
        jobs = (1_000 if size == 1 else 5_000) if quick else (5_000 if size == 1 else 20_000)
        # Taking turns, twice, so that a slower minute of the machine hits all three alike.
        per_job: dict[str, list[float]] = {"flow-none": [], "flow-cap": [], "flow-key": []}
        for _ in range(2):
            for name in per_job:
                per_job[name].append(claim_ack_seconds_per_job(name, jobs, size))
        best = {name: min(values) for name, values in per_job.items()}
        figures[f"claim size {size}"] = {
            "us per job, no limits": round(best["flow-none"] * 1e6, 1),
            "us per job, concurrency": round(best["flow-cap"] * 1e6, 1),
            "us per job, key_concurrency=1": round(best["flow-key"] * 1e6, 1),
            "ratio concurrency / none": round(best["flow-cap"] / best["flow-none"], 2),
            "ratio key_concurrency / none": round(best["flow-key"] / best["flow-none"], 2),
        }
    return figures


# -- worker runs ---------------------------------------------------------------------------


def _workers(queue_name: str, processes: int, threads: int) -> list[subprocess.Popen[bytes]]:
    command = [sys.executable, "-m", "django", "alk_worker", "--queue", queue_name,
               "--concurrency", str(threads), "-v", "0"]  # fmt: skip
    return [
        subprocess.Popen(command, env=os.environ.copy(), cwd=ROOT, start_new_session=True)
        for _ in range(processes)
    ]


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.wait(timeout=60)


def _wait_empty(queue_name: str, timeout: float) -> float:
    """Seconds until the queue holds no job."""
    from django_alkqueue.models import QueueMessage

    started = time.perf_counter()
    while QueueMessage.objects.filter(queue=queue_name).exists():
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"{queue_name} not drained in {timeout:g} s")
        time.sleep(0.01)
    return time.perf_counter() - started


def _run(queue_name: str, jobs: int, processes: int, threads: int, keyed: bool) -> float:
    """Start the workers, let them connect, make `jobs` jobs visible in one commit; returns
    the seconds until the queue is empty."""
    from django.db import transaction

    from django_alkqueue import queue

    _empty(queue_name)
    workers = _workers(queue_name, processes, threads)
    try:
        time.sleep(3.0)  # the workers start and connect
        key = (lambda p: f"k{p['i'] % KEYS}") if keyed else None
        with transaction.atomic():
            queue(queue_name).enqueue_many([{"i": i} for i in range(jobs)], concurrency_key=key)
        return _wait_empty(queue_name, timeout=600)
    finally:
        _stop(workers)


def _runs() -> list[tuple[float, float, float]]:
    from django.db import connection

    from bench.jobs.alkqueue_flow_consumers import RUNS

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT claimed_at, started_at, finished_at FROM {RUNS}")
        return [tuple(row) for row in cursor.fetchall()]


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


# -- 2. drain over 1,000 keys --------------------------------------------------------------


def drain(quick: bool) -> dict[str, Any]:
    jobs = 2_000 if quick else 20_000
    unlimited = _run("flow-drain-none", jobs, 2, 4, keyed=True)
    limited = _run("flow-drain-key", jobs, 2, 4, keyed=True)
    return {
        "jobs": jobs,
        "jobs/s, no limits": round(jobs / unlimited),
        "jobs/s, key_concurrency=1": round(jobs / limited),
        "ratio key_concurrency / none": round(unlimited / limited, 2),
    }


# -- 3. concurrency=8 kept busy ------------------------------------------------------------


def busy(quick: bool) -> dict[str, Any]:
    jobs = 800 if quick else 8_000
    _run("flow-busy", jobs, 2, 16, keyed=False)
    runs = _runs()
    spans = [(claimed, finished) for claimed, _, finished in runs]
    wall = max(f for _, f in spans) - min(c for c, _ in spans)
    held = sum(f - c for c, f in spans)
    return {
        "jobs": len(runs),
        "share of the cap busy": round(held / (8 * wall), 3),
        "most live claims at once": _most_at_once(spans),
    }


# -- 4. rate = 2000/s ----------------------------------------------------------------------


def rate(quick: bool) -> dict[str, Any]:
    seconds = 3 if quick else 10
    jobs = 2_000 * seconds + 2_000  # some left waiting at the end
    from django_alkqueue.models import QueueMessage

    _empty("flow-rate")
    from django.db import transaction

    from django_alkqueue import queue

    workers = _workers("flow-rate", 2, 16)
    try:
        time.sleep(3.0)
        with transaction.atomic():
            queue("flow-rate").enqueue_many([{"i": i} for i in range(jobs)])
        time.sleep(seconds + 1.0)
    finally:
        _stop(workers)
    QueueMessage.objects.filter(queue="flow-rate").delete()
    claims = sorted(claimed for claimed, _, _ in _runs())
    first = claims[0]
    measured = [c for c in claims if first + 0.5 <= c < first + 0.5 + seconds]
    most, start = 0, 0
    for end, moment in enumerate(claims):
        while claims[start] <= moment - 1.0:
            start += 1
        most = max(most, end - start + 1)
    return {
        "seconds measured": seconds,
        "claims/s achieved": round(len(measured) / seconds),
        "most claims in any 1 s window": most,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    name = _database(args.quick)
    _fresh_database(name)
    _setup(f"{SERVER}/{name}")
    figures = {
        "claim+ack": claim_ack(args.quick),
        "drain over 1,000 keys, 2 processes": drain(args.quick),
        "concurrency=8, 2 x 16 threads, 10 ms jobs": busy(args.quick),
        "rate=2000/s, 2 x 16 threads": rate(args.quick),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"flow-{'quick' if args.quick else 'full'}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
