"""What operating django-alkqueue costs (issue 38), each figure against its target:

1. a Prometheus scrape of `/metrics/` and `alk_health` (plain, and with `--max-age`) with 1M
   live jobs over 1,000 queues, 1,000 consumers, an hour of QueueStat minutes and the
   leader's reading written by a real worker: the median server time of repeated calls in
   this process, against the issue's 100 ms (the first scrape of a process, which sums the
   hour's settled minutes once, is shown apart);
2. a single enqueue's time without the `otel` extra (its import blocked), with the API and
   no SDK (OpenTelemetry's no-op spans), and with the SDK recording every span (no
   exporter): the cost of the traces, and that of the extra alone.

    python -m bench.observability [--quick]

Run by `make bench` and `make bench-quick` after bench.run, in a database of its own
(PREFIX + "observability"); writes results/observability-MODE.json, and for a full run the
section of docs/benchmarks.md between its markers. --quick: 20k rows, fewer repetitions.
Public APIs only, as the rest of the bench: `queue()`, `Queue.enqueue`, `alk_worker`,
`alk_health`, the metrics view through Django's test client, and the models' tables to fill.
"""

from __future__ import annotations

import argparse
import contextlib
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
DOCS = ROOT / "docs" / "benchmarks.md"
SETTINGS = "bench.settings.alkqueue_observability"
QUEUES = 1_000
TARGET_MS = 100.0
BEGIN, END = "<!-- observability:begin -->", "<!-- observability:end -->"


def _setup(url: str) -> None:
    common.setup_django(url, SETTINGS)


# -- the table ----------------------------------------------------------------------------------


def fill(rows: int) -> None:
    """`rows` live jobs over QUEUES queues (2% claimed, 2% scheduled, the rest pending for a
    minute), a consumer per queue, 20 dead letters per queue, and this hour's QueueStat
    minutes as the workers would have written them; then VACUUM ANALYZE."""
    from django.db import connection

    from django_alkqueue.models import Consumer, DeadLetter, QueueMessage, QueueStat

    live, dead = QueueMessage._meta.db_table, DeadLetter._meta.db_table
    stat, consumers = QueueStat._meta.db_table, Consumer._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO {live} (queue, payload, priority, attempts, max_attempts, backoff_base,
                lease, run_at, enqueued_at)
            SELECT 'q' || (i % {QUEUES}), '{{}}', (i % 7) - 3, 0, 5, 5, 30,
                now() - interval '1 minute', now()
            FROM generate_series(1, {rows}) AS i""")
        cursor.execute(f"""
            UPDATE {live} SET claim_token = gen_random_uuid(), claimed_by = 'bench',
                claimed_at = now(), lease_expires_at = now() + interval '1 hour', attempts = 1
            WHERE id % 50 = 0""")
        cursor.execute(f"UPDATE {live} SET run_at = now() + interval '1 hour' WHERE id % 50 = 1")
        cursor.execute(f"""
            INSERT INTO {dead} (job_id, queue, payload, priority, attempts, max_attempts,
                backoff_base, lease, run_at, enqueued_at, died_at, reason)
            SELECT {rows} + i, 'q' || (i % {QUEUES}), '{{}}', 0, 5, 5, 5, 30, now(), now(),
                now() - (i % 600) * interval '1 minute', 'failed'
            FROM generate_series(1, {QUEUES * 20}) AS i""")
        cursor.execute(f"""
            INSERT INTO {consumers} (queue, handler, lease, max_attempts, retry_policy, paused,
                code_limits, limit_overrides, created_at, updated_at)
            SELECT 'q' || i, 'bench.jobs.noop', 30, 5, '{{}}', false, '{{}}', '{{}}', now(), now()
            FROM generate_series(0, {QUEUES - 1}) AS i""")
        # Every minute of the hour so far, and the hour before (what the scrape must skip).
        # Each wait bin counts the 52 attempts too (all started within 10 ms).
        waits = [field.column for field in QueueStat._meta.fields if field.name.startswith("wait_")]
        cursor.execute(f"""
            INSERT INTO {stat} (queue, minute, pending, scheduled, claimed, dead, finished,
                failed, dead_lettered, snoozed, retried, duration_count, duration_sum,
                duration_le_5ms, duration_le_25ms, duration_le_100ms, duration_le_500ms,
                duration_le_1s, duration_le_5s, duration_le_30s, duration_le_300s,
                {", ".join(waits)})
            SELECT 'q' || q, date_trunc('minute', now()) - m * interval '1 minute', 0, 0, 0, 0,
                50, 2, 1, 0, 1, 52, 1.5, 10, 20, 30, 40, 50, 52, 52, 52,
                {", ".join("52" for _ in waits)}
            FROM generate_series(0, {QUEUES - 1}) AS q, generate_series(1, 119) AS m""")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def leader_reading(timeout: float = 300.0) -> None:
    """Run a worker (the leader) until its stats loop has read every queue once."""
    from django.db import close_old_connections

    from django_alkqueue.models import QueueStat

    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "alk_worker", "--queue", "bench", "-v", "0"],
        env=os.environ.copy(), cwd=ROOT, start_new_session=True,
    )  # fmt: skip
    try:
        started = time.monotonic()
        while (
            QueueStat.objects.filter(read_at__isnull=False).values("queue").distinct().count()
            < QUEUES
        ):
            if time.monotonic() - started > timeout:
                raise RuntimeError("the leader did not read every queue in time")
            time.sleep(1.0)
            close_old_connections()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


# -- 1. the scrape and alk_health ---------------------------------------------------------------


def _ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 1)


def scrape(repetitions: int) -> dict[str, Any]:
    """The scrape's wall time and this process's CPU for it (the server's share is the
    difference, with the machine's load): the first scrape apart, then the median."""
    from django.test import Client

    token = os.environ["BENCH_METRICS_TOKEN"]
    client = Client(headers={"Authorization": f"Bearer {token}"})
    wall, cpu, body = [], [], b""
    for _ in range(repetitions + 1):
        started, used = time.perf_counter(), time.process_time()
        response = client.get("/metrics/")
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
        assert response.status_code == 200, response.content[:200]
        body = response.content
    lines = body.decode().splitlines()
    return {"first scrape ms": round(wall[0] * 1000, 1), "scrape ms": _ms(wall[1:]),
            "scrape cpu ms": _ms(cpu[1:]), "load average": round(os.getloadavg()[0], 1),
            "samples": sum(1 for line in lines if not line.startswith("#")),
            "bytes": len(body)}  # fmt: skip


def health(repetitions: int, *args: str) -> float:
    import io

    from django.core.management import call_command

    times = []
    for _ in range(repetitions):
        started = time.perf_counter()
        # A problem's exit status (no live leader here): the checks ran all the same.
        with contextlib.suppress(SystemExit):
            call_command("alk_health", *args, stdout=io.StringIO(), stderr=io.StringIO())
        times.append(time.perf_counter() - started)
    return _ms(times)


# -- 2. the enqueue with and without traces -----------------------------------------------------

_ENQUEUE = """
import os, sys, time, json
mode = sys.argv[1]
if mode == "without the extra":
    sys.modules["opentelemetry"] = None
elif mode == "SDK, every span recorded":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider())
import django
django.setup()
from django_alkqueue import queue
q = queue("bench-enqueue")
n = int(sys.argv[2])
for i in range(200):
    q.enqueue({"i": i})
wall, cpu = time.perf_counter(), time.process_time()
for i in range(n):
    q.enqueue({"i": i})
print(json.dumps([(time.perf_counter() - wall) / n, (time.process_time() - cpu) / n]))
"""
MODES = ("without the extra", "API only, no SDK", "SDK, every span recorded")


def enqueue_cost(jobs: int, rounds: int) -> dict[str, Any]:
    """Per single enqueue in each mode, the client's CPU and the wall time (commits without
    waiting for the WAL flush, so that the disk does not drown the difference); the modes
    take turns, `rounds` times, and each mode's best round counts."""
    per_job: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    env = {**os.environ, "BENCH_SYNCHRONOUS_COMMIT": "off"}
    for _ in range(rounds):
        for mode in MODES:
            done = subprocess.run(
                [sys.executable, "-c", _ENQUEUE, mode, str(jobs)],
                env=env, cwd=ROOT, capture_output=True, text=True, check=True,
            )  # fmt: skip
            wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
            per_job[mode].append((cpu, wall))
    best = {mode: min(values) for mode, values in per_job.items()}
    base_cpu = best[MODES[0]][0]
    return {
        mode: {"us cpu": round(cpu * 1e6, 1), "us wall": round(wall * 1e6, 1),
               "cpu ratio to without": round(cpu / base_cpu, 3)}
        for mode, (cpu, wall) in best.items()
    }  # fmt: skip


# -- the page -----------------------------------------------------------------------------------


def section(figures: dict[str, Any]) -> str:
    cost = figures["scrape and alk_health"]
    rows = [
        ("scrape of /metrics/", cost["scrape ms"]),
        ("alk_health", cost["alk_health ms"]),
        ("alk_health --max-age 3600", cost["alk_health --max-age ms"]),
    ]
    lines = [
        BEGIN,
        f"{figures['rows']:,} live jobs over {QUEUES:,} queues (PostgreSQL, `make bench`, "
        f"{figures['when']}); the median of {figures['repetitions']} calls in one process.",
        "",
        "| call | ms | ratio to the 100 ms target |",
        "|---|---:|---:|",
        *(f"| {name} | {ms:.1f} | {ms / TARGET_MS:.2f} |" for name, ms in rows),
        "",
        f"The first scrape of a process, which sums the hour's settled minutes once: "
        f"{cost['first scrape ms']:.1f} ms. A scrape has {cost['samples']:,} samples "
        f"({cost['bytes'] / 1e6:.1f} MB); the web process's CPU for one is "
        f"{cost['scrape cpu ms']:.1f} ms, the rest of its time is the database's and the "
        f"machine's (load average {cost['load average']} on its 2 cores during the run).",
        "",
        "A single enqueue with and without the traces (the best of "
        f"{figures['rounds']} rounds of {figures['jobs']:,}):",
        "",
        "| otel | client CPU µs | ratio to without the extra | wall µs |",
        "|---|---:|---:|---:|",
        *(_enqueue_row(mode, v) for mode, v in figures["enqueue"].items()),
        "",
        _added_by_otel(figures["enqueue"]),
        END,
    ]
    return "\n".join(lines)


def _added_by_otel(enqueue: dict[str, dict[str, float]]) -> str:
    """What each mode with the extra added to an enqueue's client CPU, in this run."""
    base = enqueue["without the extra"]["us cpu"]
    api, sdk = enqueue["API only, no SDK"], enqueue["SDK, every span recorded"]
    return (
        f"In this run the API without an SDK added {api['us cpu'] - base:.1f} µs of client CPU "
        f"to an enqueue (x{api['cpu ratio to without']:.2f}), and the SDK recording every span "
        f"{sdk['us cpu'] - base:.1f} µs (x{sdk['cpu ratio to without']:.2f})."
    )


def _enqueue_row(mode: str, v: dict[str, float]) -> str:
    return f"| {mode} | {v['us cpu']:.1f} | {v['cpu ratio to without']:.3f} | {v['us wall']:.1f} |"


def write_docs(figures: dict[str, Any]) -> None:
    text = DOCS.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOCS.write_text(text[:start] + section(figures) + text[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md")
    args = parser.parse_args()
    rows = 20_000 if args.quick else 1_000_000
    repetitions = 3 if args.quick else 20
    url = common.own_database("observability", args.quick)
    os.environ["BENCH_METRICS_TOKEN"] = "bench-metrics-token-0123456789"
    _setup(url)
    fill(rows)
    leader_reading()
    cost = scrape(repetitions)
    cost["alk_health ms"] = health(repetitions)
    cost["alk_health --max-age ms"] = health(repetitions, "--max-age", "3600")
    jobs, rounds = (1_000, 2) if args.quick else (5_000, 5)
    figures = {
        "rows": rows, "when": time.strftime("%Y-%m-%d"), "repetitions": repetitions,
        "scrape and alk_health": cost, "jobs": jobs, "rounds": rounds,
        "enqueue": enqueue_cost(jobs, rounds),
    }  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"observability-{'quick' if args.quick else 'full'}.json"
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    if not args.quick and not args.no_docs:
        write_docs(figures)


if __name__ == "__main__":
    main()
