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
(PREFIX + "flow"); writes results/flow-MODE.json and the flow-control section of
docs/benchmarks.md (bench/page.py, flow_section). Public APIs only, as the rest of the bench:
`@consumer`, `queue()`, `Queue.enqueue_many` / `claim` / `ack_batch`, `JobHandle.ack`,
`alk_worker`, and the models to count what is left.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from . import common

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
KEYS = 1_000


def _setup(url: str) -> None:
    common.setup_django(url, "bench.settings.alkqueue_flow")
    from django.db import connection

    from bench.jobs.alkqueue_flow_consumers import RUNS

    # UNLOGGED: a job's record of its run commits without a WAL flush, so that the record
    # (written after the job's finish time is read, before its ack) does not add a flush
    # per job to the slot time and the claim rate it measures.
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE UNLOGGED TABLE {RUNS} (job_id BIGINT, claimed_at DOUBLE PRECISION, "
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
        jobs = (200 if size == 1 else 1_000) if quick else (5_000 if size == 1 else 20_000)
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
            # Each round's three loops side by side, for the spread between rounds.
            "us per job per round (none, concurrency, key_concurrency=1)": [
                [round(per_job[name][i] * 1e6, 1) for name in per_job] for i in range(2)
            ],
        }
    return figures


# -- worker runs ---------------------------------------------------------------------------


def _run(queue_name: str, jobs: int, processes: int, threads: int, keyed: bool) -> float:
    """Start the workers, let them connect, make `jobs` jobs visible in one commit; returns
    the seconds until the queue is empty."""
    from django.db import transaction

    from django_alkqueue import queue

    _empty(queue_name)
    workers = common.start_workers(queue_name, processes, "--concurrency", str(threads))
    try:
        common.wait_listening(workers)
        key = (lambda p: f"k{p['i'] % KEYS}") if keyed else None
        with transaction.atomic():
            queue(queue_name).enqueue_many([{"i": i} for i in range(jobs)], concurrency_key=key)
        return common.wait_queue_empty(queue_name, timeout=600)
    finally:
        common.stop_workers(workers)


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
    jobs = 500 if quick else 20_000
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
    jobs = 200 if quick else 8_000
    _run("flow-busy", jobs, 2, 16, keyed=False)
    runs = _runs()
    spans = [(claimed, finished) for claimed, _, finished in runs]
    wall = max(f for _, f in spans) - min(c for c, _ in spans)
    held = sum(f - c for c, f in spans)
    per_job = held / len(runs)
    return {
        "jobs": len(runs),
        "share of the cap busy": round(held / (8 * wall), 3),
        "most live claims at once": _most_at_once(spans),
        # Where a slot's time goes, per job: claim to handler start (the claim's stamp,
        # commit and hand-over), the handler, and the slot idle between a job's finish and
        # the next claim of the slot (its ack's commit, then the next claim's lead).
        "ms claim to start": round(1e3 * sum(s - c for c, s, _ in runs) / len(runs), 2),
        "ms handler": round(1e3 * sum(f - s for _, s, f in runs) / len(runs), 2),
        "ms idle per job": round(1e3 * (8 * wall - held) / len(runs), 2),
        # The share the cap could keep busy if a slot's only idle time were one durable
        # commit (the ack's): the bound of a slot freed by its ack.
        "share bound, one commit idle per job": round(per_job / (per_job + _commit_seconds()), 3),
    }


def _commit_seconds(rounds: int = 50) -> float:
    """The median time of one durable commit (a one-row INSERT in autocommit) on this
    server, now: what every ack and every claim waits for (fsync, synchronous_commit)."""
    from django.db import connection

    times = []
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_flow_commit_logged (x int)")
        for _ in range(rounds):
            started = time.perf_counter()
            cursor.execute("INSERT INTO bench_flow_commit_logged VALUES (1)")
            times.append(time.perf_counter() - started)
        cursor.execute("DROP TABLE bench_flow_commit_logged")
    return sorted(times)[len(times) // 2]


# -- 4. rate = 2000/s ----------------------------------------------------------------------


def rate(quick: bool) -> dict[str, Any]:
    seconds = 3 if quick else 10
    jobs = 2_000 * seconds + 2_000  # some left waiting at the end
    from django_alkqueue.models import QueueMessage

    _empty("flow-rate")
    from django.db import transaction

    from django_alkqueue import queue

    workers = common.start_workers("flow-rate", 2, "--concurrency", "16")
    try:
        common.wait_listening(workers)
        with transaction.atomic():
            queue("flow-rate").enqueue_many([{"i": i} for i in range(jobs)])
        time.sleep(seconds + 1.0)
    finally:
        common.stop_workers(workers)
    QueueMessage.objects.filter(queue="flow-rate").delete()
    claims = sorted(claimed for claimed, _, _ in _runs())
    first = claims[0]
    measured = [c for c in claims if first + 0.5 <= c < first + 0.5 + seconds]
    most, start = 0, 0
    for end, moment in enumerate(claims):
        while claims[start] <= moment - 1.0:
            start += 1
        most = max(most, end - start + 1)
    transactions = len(set(measured))  # one claim's jobs share its claimed_at
    return {
        "seconds measured": seconds,
        "claims/s achieved": round(len(measured) / seconds),
        "most claims in any 1 s window": most,
        # Where the rate goes: claims of a queue take turns at its gate, each holding it
        # to its commit, so claims/s = claim transactions/s x jobs per claim.
        "claim transactions/s": round(transactions / seconds),
        "jobs per claim": round(len(measured) / max(transactions, 1), 1),
        "ms per claim at the gate": round(1e3 * seconds / max(transactions, 1), 2),
        "ms per durable commit": round(1e3 * _commit_seconds(), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    url = common.own_database("flow", args.quick)
    _setup(url)
    figures = {
        "claim+ack": claim_ack(args.quick),
        "drain over 1,000 keys, 2 processes": drain(args.quick),
        "concurrency=8, 2 x 16 threads, 10 ms jobs": busy(args.quick),
        "rate=2000/s, 2 x 16 threads": rate(args.quick),
    }
    figures["run"] = {
        "mode": "quick" if args.quick else "full",
        "started": started,
        "load average at the end": round(os.getloadavg()[0], 1),
        "cores": os.cpu_count(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"flow-{'quick' if args.quick else 'full'}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    if not args.quick:  # docs/benchmarks.md holds full runs only, as bench.report's page
        from bench import page

        page.write_flow_section(figures)
        print(f"wrote the flow-control section of {page.DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
