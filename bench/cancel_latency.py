"""Cancel-to-stop latency of a running job on PostgreSQL (issue 35): from the call of
`Queue.cancel()` to the handler seeing `job.cancelled`, p50 and p99 over N cancels.

One worker (4 threads) runs the consumer of jobs/alkqueue_cancel_consumers.py, which checks
its flag every millisecond; the bench enqueues a job, waits for its handler to start, cancels
it and reads when the handler saw the flag (the NOTIFY on the worker's channel, heard by its
listener; the heartbeat is the fallback and, with the default 30 s lease, never the one).

    python -m bench.cancel_latency [--quick]

Run by `make bench` and `make bench-quick` after bench.run, in a database of its own
(PREFIX + "cancel"); writes results/cancel-MODE.json, whose figures docs/benchmarks.md quotes
("Cancelling a running job"). Public APIs only: `@consumer`, `queue()`, `Queue.enqueue` and
`cancel`, `alk_worker`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import common

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
QUEUE = "cancel-latency"


def _setup(url: str) -> None:
    common.setup_django(url, "bench.settings.alkqueue_cancel")
    from django.db import connection

    from bench.jobs.alkqueue_cancel_consumers import RUNS

    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {RUNS} (job_id BIGINT PRIMARY KEY, "
                       "started_at DOUBLE PRECISION, stopped_at DOUBLE PRECISION)")  # fmt: skip


def _read(column: str, job_id: int) -> float | None:
    from django.db import connection

    from bench.jobs.alkqueue_cancel_consumers import RUNS

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {RUNS} WHERE job_id = %s", [job_id])
        row = cursor.fetchone()
    return None if row is None else row[0]


def _wait_for(column: str, job_id: int, timeout: float = 60.0) -> float:
    until = time.monotonic() + timeout
    while (value := _read(column, job_id)) is None:
        if time.monotonic() > until:
            raise RuntimeError(f"job {job_id}: no {column} within {timeout:g} s")
        time.sleep(0.002)
    return value


def one_cancel(q: Any) -> tuple[float, float]:
    """For one running job, seconds from the call of cancel() to the handler seeing its flag
    (the cancel's own statements and commit, the NOTIFY, the listener's wake-up), and from
    cancel() returning (committed) to the same moment."""
    job = q.enqueue({})
    _wait_for("started_at", job.id)
    asked_at = time.time()
    if not q.cancel(job.id):
        raise RuntimeError(f"job {job.id} was not cancelled")
    returned_at = time.time()
    stopped_at = _wait_for("stopped_at", job.id)
    return stopped_at - asked_at, stopped_at - returned_at


def latencies(cancels: int) -> list[tuple[float, float]]:
    from django_alkqueue import queue

    command = [sys.executable, "-m", "django", "alk_worker", "--queue", QUEUE,
               "--concurrency", "4", "-v", "0"]  # fmt: skip
    worker = subprocess.Popen(command, env=os.environ.copy(), cwd=ROOT, start_new_session=True)
    try:
        q = queue(QUEUE)
        one_cancel(q)  # the first: the worker has started and its listener is connected
        return [one_cancel(q) for _ in range(cancels)]
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


def _percentiles(seen: list[float]) -> dict[str, float]:
    return {
        "p50 ms": round(statistics.median(seen) * 1000, 1),
        "p99 ms": round(seen[min(len(seen) - 1, round(0.99 * (len(seen) - 1)))] * 1000, 1),
        "max ms": round(seen[-1] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    url = common.own_database("cancel", args.quick)
    _setup(url)
    cancels = 50 if args.quick else 300
    measured = latencies(cancels)
    figures: dict[str, Any] = {"cancels": cancels}
    for label, seen in (("from the call", [m[0] for m in measured]),
                        ("from the commit", [m[1] for m in measured])):  # fmt: skip
        figures[label] = _percentiles(sorted(seen))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"cancel-{'quick' if args.quick else 'full'}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
