"""Kept history's cost (issue 35): the drain of N no-op jobs with `keep` on against the same
drain with it off, in one run; the target is keep on at least 60% of keep off.

Each round enqueues N jobs on the queue without keep and drains it with one worker
(`--concurrency 4`, `--burst`), then the same on the queue with keep
(jobs/alkqueue_kept_consumers.py: the handler returns a small dict, which is recorded); the
history is emptied before each drain. The rate is N over the worker command's wall time,
start-up included, and the figure is the median of each side and their ratio.

    python -m bench.kept_history [--quick] [--url URL] [--jobs N] [--rounds R]

Run by `make bench` and `make bench-quick` after bench.run, in a database of its own
(PREFIX + "kept") on the bench's PostgreSQL; `--url` names another database instead (for
instance `sqlite:////tmp/kept.sqlite3`; then it only prints). Writes results/kept-MODE.json,
whose figures docs/benchmarks.md quotes ("Kept history"); a full run rewrites that section.
Public APIs only: `@consumer(keep=...)`, `queue()`, `Queue.enqueue_many`, `purge` and
`stats`, `alk_worker`, and the FinishedJob model to count and empty the history.
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
#: Issue 35's target: the drain with keep on at least this share of the drain with it off.
TARGET = 0.60


def drain(name: str, jobs: int, concurrency: int) -> float:
    """Enqueue `jobs` on queue `name`, drain them with one worker; jobs per second."""
    from django_alkqueue import queue

    q = queue(name)
    q.enqueue_many([{"n": n} for n in range(jobs)])
    command = [sys.executable, "-m", "django", "alk_worker", "--queue", name, "--burst",
               "--concurrency", str(concurrency), "-v", "0"]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, env=os.environ.copy(), cwd=ROOT,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - started
    left = q.stats()
    assert left.pending == left.claimed == left.dead == 0, left
    return jobs / seconds


def measure(jobs: int, rounds: int, concurrency: int) -> dict[str, Any]:
    from bench.jobs.alkqueue_kept_consumers import KEPT, NOT_KEPT
    from django_alkqueue.models import FinishedJob

    rates: dict[str, list[float]] = {NOT_KEPT: [], KEPT: []}
    for _ in range(rounds):
        for name in (NOT_KEPT, KEPT):
            FinishedJob.objects.all().delete()
            rates[name].append(drain(name, jobs, concurrency))
        kept = FinishedJob.objects.filter(queue=KEPT).count()
        assert kept == jobs, f"{kept} of {jobs} jobs kept"
    off, on = statistics.median(rates[NOT_KEPT]), statistics.median(rates[KEPT])
    return {
        "jobs": jobs, "rounds": rounds, "concurrency": concurrency,
        "keep off jobs/s": round(off), "keep on jobs/s": round(on),
        "on / off": round(on / off, 2), "target": TARGET,
        "rounds (off, on)": [[round(a), round(b)] for a, b in
                             zip(rates[NOT_KEPT], rates[KEPT], strict=True)],
    }  # fmt: skip


def main() -> None:
    args = script_runs.arguments(__doc__)
    script_runs.start(args, "kept", "bench.settings.alkqueue_kept")
    from django.db import connection

    jobs = args.jobs or (2000 if args.quick else 5000)
    rounds = args.rounds or (1 if args.quick else 3)
    figures = {"database": connection.vendor, **measure(jobs, rounds, 4)}
    script_runs.record(args, "kept", figures, _write_section)


def _write_section() -> None:
    from bench import page

    page.write_kept_history_section()
    print(f"wrote the kept-history section of {page.DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
