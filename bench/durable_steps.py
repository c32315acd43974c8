"""Durable steps (issue 51): what a recorded step costs, how soon a signal runs its handler
again, and how fast sleeping jobs drain once they wake.

- Steps against a raw loop: N jobs of 10 no-op `job.step` calls each, run by one worker
  with `--concurrency 4`; steps/s is 10 N over the time from its first claim to the queue
  empty, claims and acks included. The
  raw loop: 4 threads, each doing one INSERT of a row like a step's and one commit per step,
  10 N rows in all; rows/s over its wall time. Target: steps at least 0.70 of the raw rate.
- Signal to handler running again: a job waits in `job.wait_for("go")`; the time from
  `Queue.signal` to its handler noting that it resumed, with one idle worker, over R
  repetitions. Target on PostgreSQL (NOTIFY wakes the worker): p50 at most 50 ms, p99 at
  most 250 ms.
- Sleeping jobs' wake-up drain: N jobs that each `job.sleep` 2 s, one worker with
  `--concurrency 4`. Its first pass (each job records its sleep and goes back to scheduled
  without holding a thread), then stops; once every job is due, a fresh worker drains
  those left, from its first claim to the queue empty. Against the same worker's drain of
  N no-op jobs, timed the same way. Target: at least 0.50.

    python -m bench.durable_steps [--quick] [--url URL] [--jobs N] [--rounds R]

Run by `make bench` and `make bench-quick` in a database of its own (PREFIX + "steps") on the
bench's PostgreSQL; `--url` runs it on MariaDB or SQLite. Writes results/steps-MODE.json,
quoted by docs/benchmarks.md ("Durable steps"). Public APIs only: `job.step`, `job.sleep`,
`job.wait_for`, `Queue.signal`, `alk_worker`, and the models to read what was recorded.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import script_runs

ROOT = Path(__file__).resolve().parent.parent
THREADS = 4
SLEEP_SECONDS = 2.0
#: The raw loop's table: the columns of a step's row.
RAW = "bench_raw_steps"


def _worker(queue_name: str, burst: bool = True) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "django", "alk_worker", "--queue", queue_name, "-v", "0",
               "--concurrency", str(THREADS), *(["--burst"] if burst else [])]  # fmt: skip
    return subprocess.Popen(command, env=os.environ.copy(), cwd=ROOT, stdout=subprocess.DEVNULL)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    worker.wait(timeout=60)


def _wait(predicate: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the durable steps bench waited too long")
        time.sleep(0.002)


def _execute(*statements: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


# -- steps against a raw loop ---------------------------------------------------------------


def steps_rate(jobs: int) -> float:
    """Steps per second of one worker running `jobs` jobs of 10 steps, from its first claim
    to the queue empty (its start-up left out), claims and acks included. A job's steps go
    with its ack, so the count is the jobs' (none left, none dead)."""
    from bench.jobs.alkqueue_steps_consumers import STEPS, STEPS_PER_JOB
    from django_alkqueue.models import DeadLetter

    seconds = _drain(STEPS, jobs)
    assert not DeadLetter.objects.filter(queue=STEPS).exists()
    return jobs * STEPS_PER_JOB / seconds


def _drain(queue_name: str, jobs: int) -> float:
    """Enqueue `jobs` jobs, start one worker: seconds from its first claim to the queue
    empty."""
    from django_alkqueue import queue

    queue(queue_name).enqueue_many([{"n": n} for n in range(jobs)])
    return _timed_drain(queue_name)


def _timed_drain(queue_name: str) -> float:
    """Start one worker on the queue's due jobs: seconds from its first claim to the queue
    empty (its start-up left out)."""
    from django_alkqueue.models import QueueMessage

    live = QueueMessage.objects.filter(queue=queue_name)
    jobs = live.count()
    worker = _worker(queue_name, burst=False)
    try:
        _wait(lambda: live.filter(claim_token__isnull=False).exists() or live.count() < jobs)
        started = time.time()
        _wait(lambda: not live.exists(), timeout=900)
        return time.time() - started
    finally:
        _stop(worker)


def raw_rate(rows: int) -> float:
    """Rows per second of THREADS threads, each an INSERT and a commit per row."""
    from django.db import connection, connections

    text = "TEXT" if connection.vendor != "postgresql" else "JSONB"
    _execute(f"DROP TABLE IF EXISTS {RAW}")
    _execute(f"CREATE TABLE {RAW} (id INTEGER PRIMARY KEY {_auto(connection.vendor)}, "
             f"job_id BIGINT, name VARCHAR(200), value {text}, recorded_at TIMESTAMP, "
             "attempt INTEGER, duration DOUBLE PRECISION)")  # fmt: skip
    each = rows // THREADS

    def loop(part: int) -> None:
        try:
            with connections["default"].cursor() as cursor:
                for i in range(each):
                    cursor.execute(
                        f"INSERT INTO {RAW} (job_id, name, value, recorded_at, attempt, duration) "
                        "VALUES (%s, %s, %s, CURRENT_TIMESTAMP, 1, 0.0)",
                        [part, f"step-{i}", "null"],
                    )  # autocommit: one commit per row
        finally:
            connections.close_all()

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(THREADS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    _execute(f"DROP TABLE {RAW}")
    return each * THREADS / seconds


def _auto(vendor: str) -> str:
    return {"postgresql": "GENERATED ALWAYS AS IDENTITY", "mysql": "AUTO_INCREMENT"}.get(vendor, "")


def steps_against_raw(jobs: int, rounds: int) -> dict[str, Any]:
    from bench.jobs.alkqueue_steps_consumers import STEPS_PER_JOB

    steps, raw = [], []
    for _ in range(rounds):
        steps.append(steps_rate(jobs))
        raw.append(raw_rate(jobs * STEPS_PER_JOB))
    s, r = statistics.median(steps), statistics.median(raw)
    return {"jobs": jobs, "steps per job": STEPS_PER_JOB, "threads": THREADS, "rounds": rounds,
            "steps/s": round(s), "raw rows/s": round(r), "steps / raw": round(s / r, 2),
            "rounds (steps, raw)": [[round(a), round(b)]
                                    for a, b in zip(steps, raw, strict=True)]}  # fmt: skip


# -- signal to handler ----------------------------------------------------------------------


def signal_latency(repetitions: int) -> dict[str, Any]:
    """Seconds from Queue.signal to the waiting job's handler running again."""
    from django.db import connection

    from bench.jobs.alkqueue_steps_consumers import RESUMED, WAITS
    from django_alkqueue import queue
    from django_alkqueue.models import WaitingJob

    _execute(f"DROP TABLE IF EXISTS {RESUMED}", f"CREATE TABLE {RESUMED} "
             "(job_id BIGINT PRIMARY KEY, resumed_at DOUBLE PRECISION)")  # fmt: skip

    def resumed(job_id: int) -> float | None:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT resumed_at FROM {RESUMED} WHERE job_id = %s", [job_id])
            row = cursor.fetchone()
        return None if row is None else float(row[0])

    waits = queue(WAITS)
    worker = _worker(WAITS, burst=False)
    latencies = []
    try:
        for _ in range(repetitions):
            job = waits.enqueue({})
            _wait(WaitingJob.objects.filter(job_id=job.id, signal="go").exists)
            time.sleep(0.05)  # the worker idle again, as an operator's signal finds it
            sent = time.time()
            assert waits.signal(job.id, "go")
            _wait(lambda job_id=job.id: resumed(job_id) is not None)
            latencies.append((resumed(job.id) or 0.0) - sent)
    finally:
        _stop(worker)
    _execute(f"DROP TABLE {RESUMED}")
    return {"repetitions": repetitions, **_summary("signal", latencies)}


def _summary(name: str, values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {f"{name} p50 ms": round(statistics.median(ordered) * 1000, 1),
            f"{name} p99 ms": round(p99 * 1000, 1),
            f"{name} max ms": round(ordered[-1] * 1000, 1)}  # fmt: skip


# -- sleeping jobs' wake-up drain -----------------------------------------------------------


def plain_drain(jobs: int) -> float:
    """Jobs/s of one worker draining `jobs` no-op jobs (_drain)."""
    from bench.jobs.alkqueue_steps_consumers import PLAIN

    return jobs / _drain(PLAIN, jobs)


def wake_drain(jobs: int) -> float:
    """Jobs/s of one worker draining the jobs woken from a 2 s sleep. A first worker runs
    every job once (each records its sleep and goes back to scheduled) and stops; once the
    last of them is due, a fresh worker drains the jobs left (all but those the first worker
    ran again before it stopped), timed as the plain drain is, from its first claim to the
    queue empty. So the figure is the woken jobs' drain, not the pace at which the first pass
    put them to sleep (which caps any clock started during the wake-ups)."""
    from django.db.models import Max
    from django.utils import timezone

    from bench.jobs.alkqueue_steps_consumers import SLEEPS
    from django_alkqueue import queue
    from django_alkqueue.models import QueueMessage

    queue(SLEEPS).enqueue_many([{"n": n} for n in range(jobs)])
    enqueued = timezone.now()
    live = QueueMessage.objects.filter(queue=SLEEPS)
    first = _worker(SLEEPS, burst=False)
    try:
        _wait(lambda: not live.filter(run_at__lte=enqueued).exists(), timeout=900)
    finally:
        _stop(first)
    last_wake = live.aggregate(last=Max("run_at"))["last"]
    if last_wake is not None:
        time.sleep(max(0.0, last_wake.timestamp() - time.time()) + 0.1)
    left = live.count()
    return left / _timed_drain(SLEEPS)


def sleeping_drain(jobs: int, rounds: int) -> dict[str, Any]:
    woken, plain = [], []
    for _ in range(rounds):
        plain.append(plain_drain(jobs))
        woken.append(wake_drain(jobs))
    w, p = statistics.median(woken), statistics.median(plain)
    return {"jobs": jobs, "threads": THREADS, "sleep s": SLEEP_SECONDS, "rounds": rounds,
            "woken jobs/s": round(w), "plain jobs/s": round(p), "woken / plain": round(w / p, 2),
            "rounds (woken, plain)": [[round(a), round(b)]
                                      for a, b in zip(woken, plain, strict=True)]}  # fmt: skip


def main() -> None:
    args = script_runs.arguments(__doc__)
    script_runs.start(args, "steps", "bench.settings.alkqueue_steps")
    from django.db import connection

    jobs = args.jobs or (200 if args.quick else 10_000)
    rounds = args.rounds or (1 if args.quick else 3)
    figures = {
        "database": connection.vendor,
        "steps against raw": steps_against_raw(jobs if args.quick else 2_000, rounds),
        "signal": signal_latency(min(args.jobs or 10, 10) if args.quick else 200),
        "sleeping drain": sleeping_drain(jobs, rounds),
    }
    script_runs.record(args, "steps", figures, _write_section)


def _write_section() -> None:
    from bench import page

    page.write_steps_section()


if __name__ == "__main__":
    main()
