"""Workflows (issue 36): what a batch costs a drain, how soon its callback follows the last
member, and how soon a dependent job runs after its dependency's ack.

- Batch drain: N no-op jobs drained by 2 worker processes (`--concurrency 4`, `--burst`),
  once as members of one batch and once without, rounds taking turns; the rate is N over
  the workers' wall time, and the figure the ratio of the medians (target: at least 0.70).
- Callback latency: batches of 20 jobs that note when each handler returned; the latency is
  the callback's enqueued_at minus the last member's return (the acker's group-commit window
  included), p50/p99 over the repetitions (target: p99 at most 1 s).
- Release latency: a job and one waiting on it, run by one worker; the latency is the
  dependent's claimed_at minus its dependency's return, p50/p99.

    python -m bench.workflows [--quick] [--url URL]

Run by `make bench` and `make bench-quick` in a database of its own (PREFIX + "workflows")
on the bench's PostgreSQL. Writes results/workflows-MODE.json, quoted by docs/benchmarks.md
("Workflows"). Public APIs only: `batch`, `Queue.enqueue_many(after=)`, `alk_worker`.
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


def _worker(queue_name: str, burst: bool = True) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "django", "alk_worker", "--queue", queue_name,
               "--concurrency", "4", "-v", "0", *(["--burst"] if burst else [])]  # fmt: skip
    return subprocess.Popen(command, env=os.environ.copy(), cwd=ROOT, stdout=subprocess.DEVNULL)


def drain(jobs: int, in_batch: bool) -> float:
    """Enqueue `jobs` no-op jobs (in one batch or not), drain them with 2 workers; jobs/s."""
    from bench.jobs.alkqueue_workflow_consumers import CALLBACKS, MEMBERS
    from django_alkqueue import batch, queue

    members = queue(MEMBERS)
    payloads = [{"n": n} for n in range(jobs)]
    if in_batch:
        with batch(on_finish=queue(CALLBACKS).job({"bench": True})):
            members.enqueue_many(payloads)
    else:
        members.enqueue_many(payloads)
    started = time.perf_counter()
    workers = [_worker(MEMBERS) for _ in range(2)]
    for worker in workers:
        assert worker.wait() == 0
    seconds = time.perf_counter() - started
    left = members.stats()
    assert left.pending == left.claimed == left.dead == 0, left
    if in_batch:
        fired = queue(CALLBACKS).stats().pending
        assert fired == 1, f"{fired} callbacks"
        queue(CALLBACKS).purge()
    return jobs / seconds


def batch_drain(jobs: int, rounds: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {"plain": [], "batch": []}
    for _ in range(rounds):
        rates["plain"].append(drain(jobs, False))
        rates["batch"].append(drain(jobs, True))
    plain, batched = (statistics.median(rates[side]) for side in ("plain", "batch"))
    return {
        "jobs": jobs, "rounds": rounds, "workers": 2, "concurrency": 4,
        "plain jobs/s": round(plain), "batch jobs/s": round(batched),
        "batch / plain": round(batched / plain, 2),
        "rounds (plain, batch)": [[round(a), round(b)] for a, b in
                                  zip(rates["plain"], rates["batch"], strict=True)],
    }  # fmt: skip


def _times() -> dict[int, tuple[float, float]]:
    from django.db import connection

    from bench.jobs.alkqueue_workflow_consumers import TIMES

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, claimed_at, returned_at FROM {TIMES}")
        return {int(i): (float(c), float(r)) for i, c, r in cursor.fetchall()}


def _wait(predicate: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the workflow bench waited too long")
        time.sleep(0.005)


def callback_latency(repetitions: int, members: int = 20) -> list[float]:
    """Seconds from the last member's return to its batch's callback's enqueue."""
    from bench.jobs.alkqueue_workflow_consumers import CALLBACKS, TIMED
    from django_alkqueue import batch, queue
    from django_alkqueue.models import Batch

    latencies = []
    for _ in range(repetitions):
        with batch(on_finish=queue(CALLBACKS).job({})) as b:
            jobs = queue(TIMED).enqueue_many([{"n": n} for n in range(members)])
        ids = {job.id for job in jobs}
        fired = Batch.objects.filter(pk=b.id, fired_at__isnull=False)
        _wait(fired.exists)
        callback = queue(CALLBACKS).get_job(Batch.objects.get(pk=b.id).finish_job_id or 0)
        assert callback is not None
        times = _times()
        last = max(times[i][1] for i in ids)
        latencies.append(callback.enqueued_at.timestamp() - last)
    queue(CALLBACKS).purge()
    return latencies


def release_latency(repetitions: int) -> list[float]:
    """Seconds from a dependency's return to its dependent's claim."""
    from bench.jobs.alkqueue_workflow_consumers import TIMED
    from django_alkqueue import queue

    latencies = []
    timed = queue(TIMED)
    for _ in range(repetitions):
        first = timed.enqueue({"step": 1})
        second = timed.enqueue({"step": 2}, after=[first])
        _wait(lambda job_id=second.id: job_id in _times())
        times = _times()
        latencies.append(times[second.id][0] - times[first.id][1])
    return latencies


def latencies(repetitions: int) -> dict[str, Any]:
    from django.db import connection

    from bench.jobs.alkqueue_workflow_consumers import TIMED, TIMES

    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TIMES}")
        cursor.execute(
            f"CREATE TABLE {TIMES} (job_id BIGINT PRIMARY KEY, claimed_at DOUBLE PRECISION, "
            "returned_at DOUBLE PRECISION)"
        )
    worker = _worker(TIMED, burst=False)
    try:
        script_runs.wait_registered([worker])
        callback = callback_latency(repetitions)
        release = release_latency(repetitions)
    finally:
        worker.terminate()
        worker.wait()
    return {"repetitions": repetitions, **_summary("callback", callback),
            **_summary("release", release)}  # fmt: skip


def _summary(name: str, values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {f"{name} p50 ms": round(statistics.median(ordered) * 1000, 1),
            f"{name} p99 ms": round(p99 * 1000, 1),
            f"{name} max ms": round(ordered[-1] * 1000, 1)}  # fmt: skip


def main() -> None:
    args = script_runs.arguments(__doc__)
    script_runs.start(args, "workflows", "bench.settings.alkqueue_workflows")
    from django.db import connection

    jobs = args.jobs or (2_000 if args.quick else 100_000)
    rounds = args.rounds or (1 if args.quick else 3)
    figures = {
        "database": connection.vendor,
        "batch drain": batch_drain(jobs, rounds),
        "latency": latencies(20 if args.quick else 200),
    }
    script_runs.record(args, "workflows", figures, _write_section)


def _write_section() -> None:
    from bench import page

    page.write_workflows_section()


if __name__ == "__main__":
    main()
