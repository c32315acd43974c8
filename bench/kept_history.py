"""Kept history's cost (docs/benchmarks.md, "Kept history"): the drain of N no-op jobs with
`keep` on against the same drain with it off, in one run.

    DATABASE_URL=... .venv/bin/python -m bench.kept_history [--jobs 5000] [--rounds 3]
        [--dialect auto|orm] [--concurrency 4]

DATABASE_URL as for the testproject (empty: SQLite). Each round enqueues N jobs on the queue
without keep and drains it with `manage.py alk_worker --burst`, then the same on the queue
with keep (bench/jobs/alkqueue_kept_consumers.py: the handler returns a small dict, which is
recorded); the history is emptied between rounds. The rate is N over the command's wall
time, start-up included. Prints the median of each and their ratio (issue 35's target: keep
on at least 60% of keep off).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSUMERS = "bench.jobs.alkqueue_kept_consumers"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dialect", choices=["auto", "orm"], default="auto")
    parser.add_argument("--concurrency", type=int, default=4)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    os.environ.update(ALKQUEUE_DIALECT=args.dialect, DJANGO_DEBUG="0",
                      ALKQUEUE_EXTRA_CONSUMERS=CONSUMERS)  # fmt: skip
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from bench.jobs.alkqueue_kept_consumers import KEPT, NOT_KEPT
    from django_alkqueue.models import FinishedJob

    call_command("migrate", verbosity=0)
    rates: dict[str, list[float]] = {NOT_KEPT: [], KEPT: []}
    for _ in range(args.rounds):
        for name in (NOT_KEPT, KEPT):
            FinishedJob.objects.all().delete()
            rates[name].append(drain(name, args.jobs, args.concurrency))
        assert FinishedJob.objects.filter(queue=KEPT).count() == args.jobs
    off, on = statistics.median(rates[NOT_KEPT]), statistics.median(rates[KEPT])
    print(f"{connection.vendor}: {args.jobs} no-op jobs, {args.rounds} rounds, "
          f"--concurrency {args.concurrency}: keep off {off:,.0f} jobs/s, keep on {on:,.0f} "
          f"jobs/s, keep on / off = {on / off:.0%}")  # fmt: skip
    print("  each round (off, on):",
          ", ".join(f"({a:,.0f}, {b:,.0f})" for a, b in zip(rates[NOT_KEPT], rates[KEPT],
                                                           strict=True)))  # fmt: skip


def drain(name: str, jobs: int, concurrency: int) -> float:
    """Enqueue `jobs` on the queue, drain it with one worker; returns jobs per second."""
    from django_alkqueue import queue

    q = queue(name)
    q.purge(["pending", "scheduled", "claimed", "dead"])
    q.enqueue_many([{"n": n} for n in range(jobs)])
    command = [sys.executable, str(ROOT / "manage.py"), "alk_worker", "--queue", name,
               "--burst", "--concurrency", str(concurrency)]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, env=os.environ, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - started
    left = q.stats()
    assert left.pending == left.claimed == left.dead == 0, left
    return jobs / seconds


if __name__ == "__main__":
    main()
