"""The process pool's drain of no-op jobs as a ratio to the thread pool's (issue 35).

One worker (`--concurrency 4`, `--burst`) drains N no-op jobs with `--pool thread`, then the
same N with `--pool process`, rounds taking turns in one run; the rate is N over the worker
command's wall time, start-up included (the process pool's fork server and children are
part of its cost), and the figure is the median of each side and their ratio.

    python -m bench.process_pool [--quick] [--url URL] [--jobs N] [--rounds R]

Run by `make bench` and `make bench-quick` after bench.run, in a database of its own
(PREFIX + "pool") on the bench's PostgreSQL; `--url` names another database instead (for
instance `sqlite:////tmp/pool.sqlite3`; then it only prints). Writes results/pool-MODE.json,
whose figures docs/benchmarks.md quotes ("The process pool"); a full run rewrites that
section. Public APIs only:
`@consumer`, `queue()`, `Queue.enqueue_many` and `stats`, `alk_worker`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import script_runs

ROOT = Path(__file__).resolve().parent.parent
POOLS = ("thread", "process")


def drain(pool: str, jobs: int, concurrency: int) -> float:
    """Enqueue `jobs` no-op jobs, drain them with one worker of `pool`; jobs per second."""
    from bench.jobs.alkqueue_pool_consumers import QUEUE
    from django_alkqueue import queue

    q = queue(QUEUE)
    q.enqueue_many([{"n": n} for n in range(jobs)])
    command = [sys.executable, "-m", "django", "alk_worker", "--queue", QUEUE, "--burst",
               "--pool", pool, "--concurrency", str(concurrency), "-v", "0"]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, env=os.environ.copy(), cwd=ROOT,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - started
    left = q.stats()
    assert left.pending == left.claimed == left.dead == 0, left
    return jobs / seconds


def measure(jobs: int, rounds: int, concurrency: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {pool: [] for pool in POOLS}
    for _ in range(rounds):
        for pool in POOLS:
            rates[pool].append(drain(pool, jobs, concurrency))
    thread, process = (statistics.median(rates[pool]) for pool in POOLS)
    return {
        "jobs": jobs, "rounds": rounds, "concurrency": concurrency,
        "thread jobs/s": round(thread), "process jobs/s": round(process),
        "process / thread": round(process / thread, 2),
        "rounds (thread, process)": [[round(a), round(b)] for a, b in
                                     zip(rates["thread"], rates["process"], strict=True)],
    }  # fmt: skip


def main() -> None:
    args = script_runs.arguments(__doc__)
    script_runs.start(args, "pool", "bench.settings.alkqueue_pool")
    from django.db import connection

    jobs = args.jobs or (2000 if args.quick else 20000)
    rounds = args.rounds or (1 if args.quick else 3)
    figures = {"database": connection.vendor, **measure(jobs, rounds, 4)}
    script_runs.record(args, "pool", figures, _write_section)


def _write_section() -> None:
    from bench import page

    page.write_process_pool_section()
    print(f"wrote the process-pool section of {page.DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
