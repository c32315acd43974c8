"""Fast by default (issue 39): `alk_worker` with no options against tuned workers, and
whether the defaults hoard long jobs, in one run.

Drain: 2 worker processes (each its own `alk_worker`, as on two hosts) drain N no-op jobs,
once per configuration, the configurations taking turns in each round:
- the defaults (no options: 4 threads, claims sized by claim_ahead.py, `-v 1`),
- the defaults with `-v 0` (what the default verbosity costs),
- the tuned ones: `--concurrency 2 --batch 2000 -v 0` and `--concurrency 1 --batch 1000 -v 0`.
The workers start first and register; the clock starts when the enqueue of the N jobs
commits (its NOTIFY wakes them) and stops when the queue is empty; start-up is left out, so
the figure is the drain itself. The workers' log goes to a file, as a service's journal
would. Targets: the defaults at least 50% of the best tuned configuration's median, and
`-v 1` costing at most 10% (the defaults at least 90% of the defaults with `-v 0`).

Hold: 2 default workers (`--burst`) run 20 jobs of 2 s each; each handler notes when its
job was claimed, started and ended. Target: no job waits claimed but unstarted in one worker
for more than 1 s while the other has a free thread; the figure is the longest such wait.

    python -m bench.defaults [--quick] [--url URL] [--jobs N] [--rounds R]

Run by `make bench` and `make bench-quick`, in a database of its own (PREFIX + "defaults")
on the bench's PostgreSQL; `--url` names another database instead (then it only prints).
Writes results/defaults-MODE.json, whose figures docs/benchmarks.md quotes ("Fast by
default"); a full run rewrites that section. Public APIs only: `@consumer`, `queue()`,
`Queue.enqueue_many` and `stats`, `alk_worker`, and the Worker and QueueMessage models to
see the workers registered and the queue empty.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import script_runs

ROOT = Path(__file__).resolve().parent.parent
#: The worker options of each configuration, the defaults first.
CONFIGS = {
    "defaults": [],
    "defaults -v 0": ["-v", "0"],
    "--concurrency 2 --batch 2000 -v 0": ["--concurrency", "2", "--batch", "2000", "-v", "0"],
    "--concurrency 1 --batch 1000 -v 0": ["--concurrency", "1", "--batch", "1000", "-v", "0"],
}
TUNED = [name for name in CONFIGS if "--batch" in name]
PROCESSES = 2
#: Issue 39's targets.
DEFAULTS_TARGET = 0.50
VERBOSITY_TARGET = 0.90
HOLD_LIMIT = 1.0
LONG_JOBS, LONG_SECONDS, THREADS = 20, 2.0, 4


def start_workers(options: list[str], log: Any) -> list[subprocess.Popen[bytes]]:
    from bench.jobs.alkqueue_defaults_consumers import NOOP

    command = [sys.executable, "-m", "django", "alk_worker", "--queue", NOOP, *options]
    return [subprocess.Popen(command, env=os.environ.copy(), cwd=ROOT, stdout=log, stderr=log)
            for _ in range(PROCESSES)]  # fmt: skip


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=60) == 0, f"worker exited {worker.returncode}"


def drain(options: list[str], jobs: int) -> float:
    """2 workers with `options` drain `jobs` no-op jobs; jobs per second from the enqueue's
    commit to the empty queue."""
    from bench.jobs.alkqueue_defaults_consumers import NOOP
    from django_alkqueue import queue
    from django_alkqueue.models import QueueMessage

    q = queue(NOOP)
    with tempfile.TemporaryFile() as log:
        workers = start_workers(options, log)
        try:
            script_runs.wait_registered(workers)
            q.enqueue_many([{"n": n} for n in range(jobs)])
            started = time.perf_counter()
            while QueueMessage.objects.filter(queue=NOOP).exists():
                time.sleep(0.01)
            seconds = time.perf_counter() - started
        finally:
            stop_workers(workers)
    left = q.stats()
    assert left.pending == left.claimed == left.dead == 0, left
    return jobs / seconds


def measure_drain(jobs: int, rounds: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {name: [] for name in CONFIGS}
    for _ in range(rounds):
        for name, options in CONFIGS.items():
            rates[name].append(drain(options, jobs))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    best = max(TUNED, key=lambda name: medians[name])
    return {
        "jobs": jobs, "rounds": rounds, "processes": PROCESSES,
        "jobs/s": {name: {"median": round(medians[name]), "min": round(min(values)),
                          "max": round(max(values)), "rounds": [round(v) for v in values]}
                   for name, values in rates.items()},
        "best tuned": best,
        "defaults / best tuned": round(medians["defaults"] / medians[best], 2),
        "defaults / defaults -v 0": round(medians["defaults"] / medians["defaults -v 0"], 2),
        "targets": {"defaults / best tuned": DEFAULTS_TARGET,
                    "defaults / defaults -v 0": VERBOSITY_TARGET},
    }  # fmt: skip


def hold_round() -> float:
    """2 default workers run LONG_JOBS jobs of LONG_SECONDS; the longest a job waited
    unstarted past HOLD_LIMIT while the other worker had a free thread (0: none did)."""
    from bench.jobs.alkqueue_defaults_consumers import LONG
    from django_alkqueue import queue

    with tempfile.NamedTemporaryFile("r") as times, tempfile.TemporaryFile() as log:
        queue(LONG).enqueue_many([{"seconds": LONG_SECONDS}] * LONG_JOBS)
        command = [sys.executable, "-m", "django", "alk_worker", "--queue", LONG, "--burst"]
        env = {**os.environ, "BENCH_DEFAULTS_TIMES": times.name}
        workers = [subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=log)
                   for _ in range(PROCESSES)]  # fmt: skip
        for worker in workers:
            assert worker.wait(timeout=120) == 0, f"worker exited {worker.returncode}"
        runs = [_run(line) for line in times.read().splitlines()]
    assert len(runs) == LONG_JOBS, f"{len(runs)} of {LONG_JOBS} jobs ran"
    return max((run[2] - run[1] - HOLD_LIMIT for run in hoarded(runs)), default=0.0)


def _run(line: str) -> tuple[str, float, float, float]:
    worker, claimed, started, ended = line.split()
    return worker, float(claimed), float(started), float(ended)


def free_thread_at(runs: list[tuple[str, float, float, float]], worker: str, at: float) -> bool:
    """Whether `worker` was up at `at` (first claim to last end) with a thread free."""
    own = [r for r in runs if r[0] == worker]
    if not min(r[1] for r in own) <= at <= max(r[3] for r in own):
        return False
    return sum(r[2] <= at < r[3] for r in own) < THREADS


def hoarded(runs: list[tuple[str, float, float, float]]) -> list[tuple[str, float, float, float]]:
    """The runs held unstarted past HOLD_LIMIT while another worker had a free thread
    (checked where that can change: the hold's limit and each job's end)."""
    found = []
    for run in runs:
        since = run[1] + HOLD_LIMIT
        moments = [since] + [r[3] for r in runs if since < r[3] < run[2]]
        others = {r[0] for r in runs} - {run[0]}
        if run[2] > since and any(free_thread_at(runs, o, at) for o in others for at in moments):
            found.append(run)
    return found


def measure_hold(rounds: int) -> dict[str, Any]:
    holds = [hold_round() for _ in range(rounds)]
    return {"jobs": LONG_JOBS, "seconds each": LONG_SECONDS, "rounds": rounds,
            "longest hold past the limit, s": [round(h, 3) for h in holds],
            "hold limit, s": HOLD_LIMIT, "met": all(h == 0 for h in holds)}  # fmt: skip


def load_average() -> list[float]:
    """The machine's load average over 1, 5 and 15 minutes: it is shared."""
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    args = script_runs.arguments(__doc__)
    script_runs.start(args, "defaults", "bench.settings.alkqueue_defaults")
    from django.db import connection

    jobs = args.jobs or (2000 if args.quick else 30000)
    # Five rounds: on the shared machine the other work's load swings within a run, and a
    # median of five rides out a round or two caught in a swing.
    rounds = args.rounds or (1 if args.quick else 5)
    figures = {"database": connection.vendor, "load average": load_average(),
               "drain": measure_drain(jobs, rounds), "hold": measure_hold(rounds),
               "load average after": load_average()}  # fmt: skip
    script_runs.record(args, "defaults", figures, _write_section)


def _write_section() -> None:
    from bench import page

    page.write_defaults_section()
    print(f"wrote the fast-by-default section of {page.DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
