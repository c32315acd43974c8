"""Scale-out (issue 39): many worker processes, a pooler, and the NOTIFY fan-out, in one run.

Each worker process is its own `alk_worker` command with its own connections, as on separate
hosts (not one command's `--processes`). Per round, in this order:

- the drain of N no-op jobs by 2, 4, 8 and 16 processes, straight to PostgreSQL;
- the drain of N by 8 processes through PgBouncer in transaction mode (Debian's pgbouncer,
  started here on a free port with PgBouncer's default pool of 20 server connections), the
  workers set up as docs/worker.md (PgBouncer) says: LISTEN on a direct alias;
- the pickup latency of 200 jobs (a quick run: 50) enqueued 20 ms apart with 1, 2 and 16
  idle processes.

A drain is bench/measure.py's: workers started, connected and warmed up, then N jobs made
visible in one commit; the rate is N over the time until none is left. All of it runs on a
PostgreSQL cluster of the script's own (bench/own_cluster.py: 16 workers need more
connections than the shared server has), so the server's CPU per job is that cluster's
processes' alone. The targets: 16 processes at least 80% of the best of the four, the
pooled drain at least 70% of the direct one with 8 processes. Each figure is the median of
the rounds with their min and max.

    python -m bench.scale_out [--quick] [--jobs N] [--rounds R]

Run by `make bench` (N = 200,000, 3 rounds) and `make bench-quick` (N = 2,000, 1 round).
Writes results/scaleout-MODE.json; a full run rewrites docs/benchmarks.md's "Scale-out"
section.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from bench import common, measure, own_cluster, script_runs
from bench.django_setup import setup_django
from bench.systems import Config
from bench.systems.alkqueue import AlkQueue

PROCESSES = (2, 4, 8, 16)
POOLED_PROCESSES = 8
LISTENING = (1, 2, 16)
#: PgBouncer's own default_pool_size: server connections per database and user.
POOL_SIZE = 20
#: Issue 39's targets.
SCALE_TARGET = 0.80
POOLER_TARGET = 0.70
RESULTS = common.RESULTS / "scaleout-full.json"
#: The run's database, in its own cluster (bench/own_cluster.py).
DATABASE = "bench_scaleout"


class SeparateWorkers(AlkQueue):
    """The bench's django-alkqueue on the run's own cluster, each worker process started as
    its own command; through a pooler on `pooler_port` when given, LISTEN then direct."""

    name = "scaleout"

    def __init__(self, cluster: own_cluster.Cluster, pooler_port: int | None = None) -> None:
        super().__init__()
        self.database = DATABASE
        self.cluster = cluster
        self.pooler_port = pooler_port
        self.server_parent = cluster.pid
        # A started worker holds a connection to this port.
        self.server_port = cluster.port if pooler_port is None else pooler_port

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        one = super().worker_commands(1, config)[0]
        return [list(one) for _ in range(processes)]

    def env(self, **extra: str) -> dict[str, str]:
        direct = f"{self.cluster.url}/{self.database}"
        if self.pooler_port is None:
            return common.python_env(self.settings, BENCH_DATABASE_URL=direct, **extra)
        pooled = f"postgres://root@127.0.0.1:{self.pooler_port}/{self.database}"
        return common.python_env(self.settings, BENCH_DATABASE_URL=pooled,
                                 BENCH_LISTEN_URL=direct, **extra)  # fmt: skip

    def connection(self) -> psycopg.Connection[Any]:
        return psycopg.connect(f"{self.cluster.url}/{self.database}", autocommit=True)


@contextmanager
def pgbouncer(cluster: own_cluster.Cluster) -> Iterator[int]:
    """Debian's PgBouncer in transaction mode in front of the run's cluster; its port."""
    from tests.pgbouncer import started

    with started("127.0.0.1", cluster.port, "root", POOL_SIZE) as port:
        yield port


def drains(cluster: own_cluster.Cluster, jobs: int, rounds: int, config: Config) -> dict[str, Any]:
    """Every round: the direct drains by PROCESSES, then the pooled one."""
    direct = SeparateWorkers(cluster)
    runs: dict[str, list[dict[str, Any]]] = {str(p): [] for p in PROCESSES}
    runs["pooled"] = []
    with pgbouncer(cluster) as port:
        pooled = SeparateWorkers(cluster, port)
        for r in range(rounds):
            for processes in PROCESSES:
                runs[str(processes)].append(drain(direct, jobs, processes, config, f"{r}"))
                _progress(f"{processes} processes", runs[str(processes)][-1])
            runs["pooled"].append(drain(pooled, jobs, POOLED_PROCESSES, config, f"pooled-{r}"))
            _progress(f"{POOLED_PROCESSES} processes through PgBouncer", runs["pooled"][-1])
    return {key: _summary(found, config, jobs) for key, found in runs.items()}


def drain(
    system: SeparateWorkers, jobs: int, processes: int, config: Config, tag: str
) -> dict[str, Any]:
    """bench/measure.py's drain, with the transactions the database committed per job (the
    workers' start and warm-up included: a few hundred against N jobs)."""
    before = _commits(system)
    run = measure.drain(system, jobs, processes, config, f"drain-{processes}-{tag}")
    return {**run, "commits_per_job": (_commits(system) - before) / jobs}


def _commits(system: SeparateWorkers) -> int:
    # The stopped workers' backends flushed their counts as they exited.
    with system.connection() as conn:
        row = conn.execute("SELECT xact_commit FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()  # fmt: skip
    return int(row[0]) if row else 0


def _summary(runs: list[dict[str, Any]], config: Config, jobs: int) -> dict[str, Any]:
    summary = measure.drain_summary(runs, config, jobs, runs[0]["processes"])
    return {**summary, "commits_per_job": common.figure([r["commits_per_job"] for r in runs])}


def _progress(what: str, run: dict[str, Any]) -> None:
    server = run["server_cpu_ms_per_job"]
    load = os.getloadavg()[0]
    print(f"  {what}: {run['jobs_per_s']:,.0f} jobs/s, server {server:.3f} ms/job, "
          f"{run['commits_per_job']:.3f} commits/job, load {load:.1f}", flush=True)  # fmt: skip


def latencies(
    cluster: own_cluster.Cluster, rounds: int, config: Config, jobs: int
) -> dict[str, Any]:
    """Pickup latency of `jobs` jobs with LISTENING idle processes, taking turns within each
    round."""
    system = SeparateWorkers(cluster)
    runs: dict[int, list[dict[str, Any]]] = {p: [] for p in LISTENING}
    for _ in range(rounds):
        for processes in LISTENING:
            runs[processes].append(measure.latency(system, config, jobs, 0.02, processes))
            print(f"  pickup with {processes} listening: p99 "
                  f"{runs[processes][-1]['p99_ms']:.1f} ms", flush=True)  # fmt: skip
    return {str(p): measure.latency_summary(found, config, jobs) for p, found in runs.items()}


def ratios(drained: dict[str, Any], picked: dict[str, Any]) -> dict[str, Any]:
    """The figures the targets read: medians over medians, and per round for the pooler."""
    rate = {key: found["jobs_per_s"]["median"] for key, found in drained.items()}
    best = max(rate[str(p)] for p in PROCESSES)
    pooled = drained["pooled"]["jobs_per_s"]["values"]
    direct = drained[str(POOLED_PROCESSES)]["jobs_per_s"]["values"]
    per_round = [p / d for p, d in zip(pooled, direct, strict=True)]
    fan_out = picked[str(LISTENING[-1])]["p99_ms"]["median"]
    return {
        "16 / best": rate[str(PROCESSES[-1])] / best,
        "best processes": max(PROCESSES, key=lambda p: rate[str(p)]),
        "pooled / direct": common.figure(per_round),
        "p99 16 / 1 listening": fan_out / picked[str(LISTENING[0])]["p99_ms"]["median"],
        "targets": {"16 / best": SCALE_TARGET, "pooled / direct": POOLER_TARGET},
    }


def main() -> None:
    args = script_runs.arguments(__doc__)
    # A SIGTERM unwinds like an error: the workers, PgBouncer and the cluster are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.url is not None:
        raise SystemExit("bench.scale_out runs on a PostgreSQL cluster of its own (no --url)")
    jobs = args.jobs or (2000 if args.quick else 200_000)
    rounds = args.rounds or (1 if args.quick else 3)
    config = AlkQueue().configs(args.quick)[0]
    load_before = os.getloadavg()
    with own_cluster.started() as cluster:
        with psycopg.connect(f"{cluster.url}/postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{DATABASE}"')
        setup_django(f"{cluster.url}/{DATABASE}", "bench.settings.alkqueue")
        drained = drains(cluster, jobs, rounds, config)
        picked = latencies(cluster, rounds, config, 50 if args.quick else 200)
        from django.db import connections

        connections.close_all()  # before the cluster stops
    figures = {
        "database": "postgresql", "jobs": jobs, "rounds": rounds, "config": config.label,
        "cores": os.cpu_count(), "pool_size": POOL_SIZE,
        "max_connections": own_cluster.MAX_CONNECTIONS,
        "load average before": [round(x, 1) for x in load_before],
        "load average after": [round(x, 1) for x in os.getloadavg()],
        "drains": drained, "pickup": picked, "ratios": ratios(drained, picked),
    }  # fmt: skip
    script_runs.record(args, "scaleout", figures, _write_section)


def _write_section() -> None:
    from bench import page

    page.write_scale_out_section()
    print(f"wrote the scale-out section of {page.DOCS.relative_to(common.ROOT)}")


# -- the section of docs/benchmarks.md ---------------------------------------------------------


def section(path: Path) -> str:
    """The figures of the last full run as the page's lists, or a line saying there is none."""
    if not path.exists():
        return "Not measured in this run (`python -m bench.scale_out`)."
    f = json.loads(path.read_text())
    parts = [_drain_table(f), _verdicts(f), _where_the_time_goes(f), _pickup_table(f),
             _conditions(f)]  # fmt: skip
    return "\n\n".join(part for part in parts if part)


def _range(fig: dict[str, Any], fmt: str) -> str:
    return (f"{format(fig['median'], fmt)} ({format(fig['min'], fmt)} to "
            f"{format(fig['max'], fmt)})")  # fmt: skip


def _drain_table(f: dict[str, Any]) -> str:
    rows = ["| worker processes | jobs/s | server CPU ms/job | worker CPU ms/job | commits/job "
            "| machine busy |", "|---|---|---|---|---|---|"]  # fmt: skip
    for key, label in [*((str(p), f"{p}") for p in PROCESSES),
                       ("pooled", f"{POOLED_PROCESSES}, through PgBouncer")]:  # fmt: skip
        d = f["drains"][key]
        rows.append(f"| {label} | {_range(d['jobs_per_s'], ',.0f')} | "
                    f"{_range(d['server_cpu_ms_per_job'], '.3f')} | "
                    f"{_range(d['cpu_ms_per_job'], '.3f')} | "
                    f"{_range(d['commits_per_job'], '.3f')} | "
                    f"{d['machine_busy']['median']:.0%} |")  # fmt: skip
    return "\n".join(rows)


def _verdicts(f: dict[str, Any]) -> str:
    r = f["ratios"]
    scale, pooled = r["16 / best"], r["pooled / direct"]
    one, most = (f["pickup"][str(p)]["p50_ms"]["median"] for p in (LISTENING[0], LISTENING[-1]))
    p50 = most / one

    def met(value: float, target: float) -> str:
        return "met" if value >= target else "**missed**"

    return (f"- 16 processes: **{scale:.0%}** of the best of the four ({r['best processes']} "
            f"processes; target at least {SCALE_TARGET:.0%}: {met(scale, SCALE_TARGET)})\n"
            f"- through PgBouncer, {POOLED_PROCESSES} processes: **{pooled['median']:.0%}** "
            f"({pooled['min']:.0%} to {pooled['max']:.0%}) of the same drain direct in the "
            f"same round (target at least {POOLER_TARGET:.0%}: "
            f"{met(pooled['median'], POOLER_TARGET)})\n"
            f"- pickup with 16 processes listening: p50 {p50:.1f}x and p99 "
            f"{r['p99 16 / 1 listening']:.1f}x the figures with one")  # fmt: skip


def _cpu(drain: dict[str, Any]) -> float:
    """Worker and server CPU per job, ms (medians)."""
    return float(drain["cpu_ms_per_job"]["median"] + drain["server_cpu_ms_per_job"]["median"])


def _where_the_time_goes(f: dict[str, Any]) -> str:
    """For each missed target, what the figures say: CPU per job against the cores, and the
    commits per job. Empty when both are met."""
    r, d = f["ratios"], f["drains"]
    notes = []
    if r["16 / best"] < SCALE_TARGET:
        best, most = d[str(r["best processes"])], d[str(PROCESSES[-1])]
        notes.append(
            f"Where the time goes at 16 processes: each job cost {_cpu(most):.3f} ms of CPU "
            f"(workers and server) against {_cpu(best):.3f} ms with {r['best processes']}, "
            f"and the database committed {most['commits_per_job']['median']:.3f} transactions "
            f"per job against {best['commits_per_job']['median']:.3f}. The machine was "
            f"{best['machine_busy']['median']:.0%} busy at {r['best processes']} processes "
            f"already, so the rate can only fall as the CPU per job rises: that alone predicts "
            f"{_cpu(best) / _cpu(most):.0%} of the best rate, and {r['16 / best']:.0%} was "
            f"measured. Each process gets a sixteenth of the jobs, so the ack groups "
            f"(`ACK_WINDOW`, 2 ms) and the claims (sized to the free threads) of each carry "
            f"fewer jobs, and every process's own loops (heartbeat, statistics, LISTEN, "
            f"leader) and threads share the same {f['cores']} cores with the other 15."
        )
    pooled = r["pooled / direct"]["median"]
    if pooled < POOLER_TARGET:
        direct, through = d[str(POOLED_PROCESSES)], d["pooled"]
        notes.append(
            f"Through PgBouncer each job cost {through['server_cpu_ms_per_job']['median']:.3f} "
            f"ms of server CPU against {direct['server_cpu_ms_per_job']['median']:.3f} direct: "
            f"behind a pooler nothing is prepared, so every claim and ack is planned again "
            f"([worker.md](worker.md#pgbouncer)), and PgBouncer's own process (not counted "
            f"here) relays every statement on the same {f['cores']} cores."
        )
    return "\n\n".join(notes)


def _pickup_table(f: dict[str, Any]) -> str:
    rows = ["| idle processes listening | pickup p50 ms | pickup p99 ms |", "|---|---|---|"]
    for p in LISTENING:
        d = f["pickup"][str(p)]
        rows.append(f"| {p} | {_range(d['p50_ms'], '.1f')} | {_range(d['p99_ms'], '.1f')} |")
    return "\n".join(rows)


def _conditions(f: dict[str, Any]) -> str:
    before, after = f["load average before"], f["load average after"]
    return (f"({f['jobs']:,} no-op jobs per drain, `{f['config']}` per process, "
            f"rounds: {f['rounds']}, medians with min to max; {f['cores']} cores; PgBouncer "
            f"pool of {f['pool_size']} server connections; load average "
            f"{before[0]:.1f} / {before[1]:.1f} / {before[2]:.1f} before the run and "
            f"{after[0]:.1f} / {after[1]:.1f} / {after[2]:.1f} after it.)")  # fmt: skip


if __name__ == "__main__":
    main()
