"""The measurements every system goes through, written once: enqueue, drain, pickup latency.

Each returns plain dicts (JSON-ready). A drain starts the workers, waits until every worker
process is connected and a few warm-up jobs have run, then makes N jobs visible in one
commit and polls the database until none is left unfinished: N / (done - commit) jobs/s.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from . import common
from .systems import Config, NotSupported, System
from .vacuum import Vacuumer

WARM_UP_JOBS = 20
#: After the warm-up, before the measured part: the workers idle again. A quick run (CI's
#: check that the harness runs, its figures no target) settles for less.
SETTLE_SECONDS = 1.0
QUICK_SETTLE_SECONDS = 0.2


def settle_seconds(quick: bool) -> float:
    return QUICK_SETTLE_SECONDS if quick else SETTLE_SECONDS


def payloads(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"i": i} for i in range(start, start + n)]


# -- enqueue ----------------------------------------------------------------------------------


def enqueue(system: System, call: str, n: int, reps: int) -> dict[str, Any]:
    """`call` ("enqueue_one", "enqueue_bulk", raw's "insert_many") of n jobs, `reps` times
    into emptied tables; jobs/s."""
    rates = []
    for _ in range(reps):
        system.reset()
        try:
            rates.append(n / _timed(system, call, payloads(n)))
        except NotSupported:
            return {"n": n, "supported": False}
    system.reset()
    return {"n": n, "supported": True, "jobs_per_s": common.figure(rates)}


def side_by_side(
    sides: dict[str, System], call: str, n: int, reps: int, chunk: int
) -> dict[str, Any]:
    """`call` ("enqueue_one" or "enqueue_bulk") of n jobs per system and repetition, the
    systems taking turns every `chunk` jobs in one window, which one goes first alternating:
    a commit latency that drifts during the run weighs on both alike. The ratio is the
    second system's rate over the first's, per repetition."""
    names = list(sides)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(reps):
        spent = dict.fromkeys(names, 0.0)
        for system in sides.values():
            system.reset()
        batch = payloads(n)
        for turn, start in enumerate(range(0, n, chunk)):
            part = batch[start : start + chunk]
            for name in names if (turn + rep) % 2 == 0 else names[::-1]:
                spent[name] += _timed(sides[name], call, part)
        for name in names:
            rates[name].append(n / spent[name])
    for system in sides.values():
        system.reset()
    ratios = [b / a for a, b in zip(rates[names[0]], rates[names[1]], strict=True)]
    return {"n": n, "chunk": chunk, "ratio": common.figure(ratios),
            "jobs_per_s": {name: common.figure(r) for name, r in rates.items()}}  # fmt: skip


def _timed(system: System, call: str, part: list[dict[str, Any]]) -> float:
    """Seconds `call` took for `part`: one call per job for "enqueue_one", else one call."""
    method = getattr(system, call)
    started = time.perf_counter()
    if call == "enqueue_one":
        for payload in part:
            method(payload)
    else:
        method(part)
    return time.perf_counter() - started


# -- workers ----------------------------------------------------------------------------------


def start_workers(
    system: System,
    processes: int,
    config: Config,
    tag: str,
    settle: float = SETTLE_SECONDS,
    **env: str,
) -> common.Workers:
    """Workers started, connected, warmed up and idle (after `settle` seconds)."""
    workers = common.Workers(
        system.worker_commands(processes, config), system.worker_env(config, **env),
        f"{system.name}-{tag}",
    )  # fmt: skip

    def started() -> bool:
        return system.workers_ready(workers) or not workers.alive()

    try:
        common.wait_until(started, 60, 0.05)
        if not workers.alive():
            raise RuntimeError(f"worker exited at start:\n{workers.tail()}")
        with system.connection() as conn:
            system.seed(payloads(WARM_UP_JOBS * processes, start=10**9), config)
            common.wait_until(lambda: not system.unfinished(conn), 120, 0.05)
        time.sleep(settle)
    except BaseException:
        workers.stop()
        raise
    return workers


def drain(
    system: System,
    n: int,
    processes: int,
    config: Config,
    tag: str,
    settle: float = SETTLE_SECONDS,
) -> dict[str, Any]:
    """One drain of n jobs."""
    system.reset()
    workers = start_workers(system, processes, config, tag, settle)
    try:
        batch = payloads(n)
        vacuumer = Vacuumer(system.database, system.vacuum_tables)
        with system.connection() as conn, vacuumer:
            cpu_before = workers.cpu_seconds()
            system.seed(batch, config)
            committed = time.perf_counter()
            # After the seed: its INSERTs do not count.
            server_before = common.server_cpu(system.server_process, system.server_parent)
            statements_before = system.server_statements()
            machine_before = common.machine_cpu()
            timeout = max(120.0, n / 20)
            try:
                done = common.wait_until(
                    lambda: not system.unfinished(conn), timeout, common.adaptive_interval
                )
            except TimeoutError:
                left = system.unfinished_count(conn)
                raise RuntimeError(f"{left} of {n} jobs left after {timeout:.0f}s:\n"
                                   f"{workers.tail()}") from None  # fmt: skip
            cpu = workers.cpu_seconds() - cpu_before
            busy = common.machine_busy_since(machine_before)
            server_after = common.server_cpu(system.server_process, system.server_parent)
            statements_after = system.server_statements()
            server = common.server_cpu_delta(server_before, server_after)
            # The completion polls' own backend: part of the server figure, not the system's.
            poll_pid = system.poll_backend_pid(conn)
            poll = server_after.get(poll_pid, 0.0) - server_before.get(poll_pid, 0.0)
        elapsed = done - committed
        rss = workers.peak_rss_mb()
    finally:
        workers.stop()
    system.reset()
    return {
        "n": n,
        "processes": processes,
        "seconds": elapsed,
        "jobs_per_s": n / elapsed,
        "cpu_ms_per_job": cpu * 1000 / n,
        "server_cpu_ms_per_job": server * 1000 / n,
        "poll_server_cpu_ms_per_job": poll * 1000 / n,
        "machine_busy": busy,
        "peak_rss_mb": rss,
        "vacuums": vacuumer.vacuums,
        # Every session's statements over the drain (the completion polls' too), per job.
        "server_statements_per_job": (statements_after - statements_before) / n
        if statements_before is not None and statements_after is not None
        else None,
    }


def drain_summary(
    runs: list[dict[str, Any]], config: Config, n: int, processes: int
) -> dict[str, Any]:
    """The repetitions of one drain as figures (median, min, max)."""
    keys = ("jobs_per_s", "cpu_ms_per_job", "server_cpu_ms_per_job", "poll_server_cpu_ms_per_job",
            "machine_busy", "peak_rss_mb")  # fmt: skip
    counted = [r["server_statements_per_job"] for r in runs
               if r.get("server_statements_per_job") is not None]  # fmt: skip
    return {"config": config.label, "n": n, "processes": processes,
            **{k: common.figure([r[k] for r in runs]) for k in keys},
            **({"server_statements_per_job": common.figure(counted)} if counted else {}),
            "vacuums": [r["vacuums"] for r in runs]}  # fmt: skip


# -- pickup latency ---------------------------------------------------------------------------


def latency(
    system: System,
    config: Config,
    jobs: int,
    gap: float,
    processes: int = 1,
    settle: float = SETTLE_SECONDS,
) -> dict[str, Any]:
    """`processes` idle worker processes; `jobs` jobs enqueued `gap` s apart; each job's start
    minus enqueue."""
    system.reset()
    fd, name = tempfile.mkstemp(prefix=f"bench-latency-{system.name}-", suffix=".txt")
    os.close(fd)
    path = Path(name)
    workers = start_workers(
        system, processes, config, f"latency-{processes}", settle, BENCH_LATENCY_FILE=name
    )
    try:
        path.write_text("")  # the warm-up jobs carry no "t"; start clean all the same
        first = time.perf_counter()
        for i in range(jobs):
            delay = first + i * gap - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            system.enqueue_for_latency({"i": i, "t": time.time()}, config)

        def recorded() -> int:
            return len(path.read_text().splitlines())

        common.wait_until(lambda: recorded() >= jobs, 60, 0.05)
    finally:
        workers.stop()
    pairs = [line.split() for line in path.read_text().splitlines()]
    path.unlink()
    waits = [(float(start) - float(t)) * 1000 for t, start in pairs]
    system.reset()
    return {
        "jobs": jobs,
        "gap_ms": gap * 1000,
        "p50_ms": common.percentile(waits, 50),
        "p95_ms": common.percentile(waits, 95),
        "p99_ms": common.percentile(waits, 99),
        "max_ms": max(waits),
    }


def latency_summary(
    runs: list[dict[str, Any]], config: Config, jobs: int = 200, gap: float = 0.02
) -> dict[str, Any]:
    return {
        "config": config.label,
        "jobs": jobs,
        "gap_ms": gap * 1000,
        **{k: common.figure([r[k] for r in runs]) for k in ("p50_ms", "p95_ms", "p99_ms")},
    }
