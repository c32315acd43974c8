"""A held-back vacuum (issue 39): the drain of N no-op jobs while another session holds a
snapshot open, as a ratio to the same drain with none held, in one run.

The held session is what a long report or an idle-in-transaction session is to a queue:
`BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1` on a connection of its own to the queue's
database, left open for the whole drain. Its snapshot pins the database's xmin horizon, so
neither VACUUM (the harness's stand-in for autovacuum, bench/vacuum.py, and the worker
leader's) nor index scans can remove or mark dead the entries of the rows claimed and acked
so far: every claim walks past all of them at the head of the claim index.

Each round drains N jobs with 2 processes for each configuration, held and free taking
turns: django-alkqueue's `alk_worker` with `--batch 1` and with its default claim size (no
`--batch`), and beside them the raw SQL ceiling loops (bench/systems/raw.py) claiming 1 and
100 per transaction. The drain is bench/measure.py's (workers started and warmed up, N jobs
made visible in one commit, polled until none is left); the figure per configuration is the
median held / free ratio of the rounds with its min and max.

    python -m bench.held_vacuum [--quick] [--jobs N] [--rounds R]

Run by `make bench` and `make bench-quick` in a database of its own (PREFIX + "held") on
the bench's PostgreSQL (a held snapshot is PostgreSQL's case; `--url` is not supported).
Writes results/held-MODE.json; a full run rewrites its section of docs/benchmarks.md ("A
held-back vacuum").
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench import script_runs

#: Issue 39's target: the drain with a snapshot held at least this share of the drain free.
TARGET = 0.50
PROCESSES = 2


@contextmanager
def held_snapshot(database: str) -> Iterator[int]:
    """A REPEATABLE READ transaction with its snapshot taken, open until the block ends;
    yields its backend's pid."""
    from bench import common

    conn = common.connect(database)
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")
        yield conn.info.backend_pid
    finally:
        conn.close()


def configurations() -> list[tuple[Any, Any]]:
    """(system, config) pairs, each system on the script's own database, its tables made."""
    from django.db import connection

    from bench.systems import Config, load
    from django_alkqueue import defaults

    database = connection.settings_dict["NAME"]
    raw, alk = load("raw"), load("alkqueue")
    for system in (raw, alk):
        system.database = database
    raw.install()
    alk.install()
    c = defaults.WORKER_CONCURRENCY
    return [
        (alk, Config("alk_worker --batch 1", {"concurrency": c, "batch": 1})),
        (alk, Config("alk_worker, default claim size", {"concurrency": c, "batch": None})),
        (raw, Config("raw claim 1 per tx", {"batch": 1})),
        (raw, Config("raw claim 100 per tx", {"batch": 100})),
    ]


def drain(
    system: Any, config: Any, jobs: int, held: bool, settle: float, attempts: int = 3
) -> dict[str, Any]:
    """One measure.drain of `jobs`, with a snapshot held across it or not; run again from
    the start when the shared server dropped the connections (other suites restart it)."""
    from bench import common

    for attempt in range(1, attempts + 1):
        try:
            return _drain_once(system, config, jobs, held, settle)
        except Exception as exc:
            if attempt == attempts or not common.is_connection_error(exc):
                raise
            print(f"connections dropped ({exc}); drain run again", flush=True)
            common.wait_for_server()
            system.reconnect()
    raise AssertionError("unreachable")


def _drain_once(system: Any, config: Any, jobs: int, held: bool, settle: float) -> dict[str, Any]:
    from bench import measure

    tag = f"held-{'on' if held else 'off'}"
    if not held:
        return measure.drain(system, jobs, PROCESSES, config, tag, settle)
    with held_snapshot(system.database):
        return measure.drain(system, jobs, PROCESSES, config, tag, settle)


def measure_all(jobs: int, rounds: int, settle: float) -> list[dict[str, Any]]:
    rows = []
    for system, config in configurations():
        runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
        for turn in range(rounds):
            # Which side goes first alternates, so a load that drifts weighs on both alike.
            for held in (False, True) if turn % 2 == 0 else (True, False):
                runs[held].append(drain(system, config, jobs, held, settle))
                rate = runs[held][-1]["jobs_per_s"]
                print(f"{config.label}, held={held}: {rate:,.0f} jobs/s", flush=True)
        rows.append(_row(system.name, config.label, runs[False], runs[True]))
    return rows


def _row(
    system: str, label: str, free: list[dict[str, Any]], held: list[dict[str, Any]]
) -> dict[str, Any]:
    """One configuration's figures: each side's rate and server CPU per job, their ratio."""
    from bench import common

    def fig(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
        return common.figure([r[key] for r in runs])

    ratios = [h["jobs_per_s"] / f["jobs_per_s"] for f, h in zip(free, held, strict=True)]
    return {
        "config": label, "system": system,
        "free jobs/s": fig(free, "jobs_per_s"), "held jobs/s": fig(held, "jobs_per_s"),
        "held / free": common.figure(ratios), "met": statistics.median(ratios) >= TARGET,
        "free server cpu ms/job": fig(free, "server_cpu_ms_per_job"),
        "held server cpu ms/job": fig(held, "server_cpu_ms_per_job"),
        "held vacuums": [r["vacuums"] for r in held],
    }  # fmt: skip


def main() -> None:
    args = script_runs.arguments(__doc__)
    if args.url is not None:
        raise SystemExit("bench.held_vacuum runs on the bench's own PostgreSQL only (no --url)")
    script_runs.start(args, "held", "bench.settings.alkqueue")
    jobs = args.jobs or (500 if args.quick else 20000)
    rounds = args.rounds or (1 if args.quick else 3)
    load_before = os.getloadavg()
    started = time.time()
    from bench import measure

    rows = measure_all(jobs, rounds, measure.settle_seconds(args.quick))
    figures = {
        "jobs": jobs, "rounds": rounds, "processes": PROCESSES, "target": TARGET,
        "load average before": [round(x, 2) for x in load_before],
        "load average after": [round(x, 2) for x in os.getloadavg()],
        "minutes": round((time.time() - started) / 60, 1),
        "drains": rows,
    }  # fmt: skip
    script_runs.record(args, "held", figures, _write_section)


def _write_section() -> None:
    from bench import page

    page.write_held_vacuum_section()
    print(f"wrote the held-back vacuum section of {page.DOCS.relative_to(page.common.ROOT)}")


if __name__ == "__main__":
    main()
