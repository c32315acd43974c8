"""`make soak` (not in CI): hours of load in small. django-alkqueue on PostgreSQL, 2 worker
processes with the package defaults (`alk_worker --processes 2 -v 0`), fed for SOAK_MINUTES
(30 by default) by 2 enqueuing processes at half the drain capacity measured first in the
same run; a row of figures per minute, the targets, results/soak.{json,md}, the plot
docs/images/soak.png and the "Hours of load" section of docs/benchmarks.md.

    python -m bench.soak --minutes 4

Autovacuum: the migration sets the queue table's autovacuum storage parameters (threshold
5,000 dead or inserted rows, scale factor 0). PostgreSQL ignores them while the server runs
with `autovacuum = off` (as this machine's does: a per-table setting cannot turn it on), and
the server's settings are shared with every other suite here, so this script applies
autovacuum's own rule with the table's storage parameters, once per `autovacuum_naptime`
(the server's), where the server has autovacuum off. Where it is on, the server does it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import common

SETTINGS = "bench.settings.alkqueue"
QUEUE = "bench"
#: One job in SAMPLE carries its enqueue time: the pickup latency of a sample of the jobs.
SAMPLE = 20
#: Enqueue ticks: each enqueuer sends what is due every TICK seconds (`enqueue_many`).
TICK = 0.02
CAPACITY_N = 20_000
CAPACITY_REPS = 3
RSS_GROWTH_MB = 10.0
WITHIN = 0.10
IMAGE = common.ROOT / "docs" / "images" / "soak.png"
DOCS = common.ROOT / "docs" / "benchmarks.md"
START, END = "<!-- soak:start -->", "<!-- soak:end -->"


# -- the enqueuers (processes of their own) ---------------------------------------------------


def enqueuer(rate: float, seconds: float, first: int) -> None:
    """Enqueue `rate` jobs/s for `seconds`, in a batch every TICK; prints what it sent."""
    import django

    django.setup()
    from django_alkqueue import queue

    q = queue(QUEUE)
    started = time.perf_counter()
    sent = 0
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(rate * elapsed) - sent
        if due > 0:
            t = time.time()
            q.enqueue_many([_payload(first + sent + k, t) for k in range(due)])
            sent += due
        time.sleep(max(0.0, TICK - (time.perf_counter() - started - elapsed)))
    print(json.dumps({"sent": sent, "seconds": time.perf_counter() - started}), flush=True)


def _payload(i: int, t: float) -> dict[str, Any]:
    return {"i": i, "t": t} if i % SAMPLE == 0 else {"i": i}


# -- autovacuum's rule, where the server has it off -------------------------------------------


class Autovacuum:
    """Once per naptime: VACUUM the table when its dead (or inserted) rows pass its storage
    parameters' threshold, ANALYZE when its changed rows pass the analyze threshold."""

    def __init__(self, database: str, table: str) -> None:
        self.database, self.table = database, table
        self.vacuums = self.analyzes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-autovacuum", daemon=True)
        with common.connect(database) as conn:
            self.server_on = conn.execute("SHOW autovacuum").fetchone()[0] == "on"
            self.naptime = _seconds(conn.execute("SHOW autovacuum_naptime").fetchone()[0])
            self.options = self._options(conn)

    def _options(self, conn: Any) -> dict[str, float]:
        row = conn.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [self.table])
        found = dict(o.split("=", 1) for o in (row.fetchone() or [None])[0] or [])
        defaults = {
            "autovacuum_vacuum_threshold": 50,
            "autovacuum_vacuum_scale_factor": 0.2,
            "autovacuum_vacuum_insert_threshold": 1000,
            "autovacuum_vacuum_insert_scale_factor": 0.2,
            "autovacuum_analyze_threshold": 50,
            "autovacuum_analyze_scale_factor": 0.1,
        }
        return {k: float(found.get(k, v)) for k, v in defaults.items()}

    def __enter__(self) -> Autovacuum:
        if not self.server_on:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(120)

    def _run(self) -> None:
        with common.connect(self.database) as conn:
            conn.autocommit = True
            while not self._stop.wait(self.naptime):
                self.tick(conn)

    def tick(self, conn: Any) -> None:
        o = self.options
        row = conn.execute(
            "SELECT n_live_tup, n_dead_tup, n_ins_since_vacuum, n_mod_since_analyze "
            "FROM pg_stat_user_tables WHERE relname = %s", [self.table]
        ).fetchone()  # fmt: skip
        if row is None:
            return
        live, dead, inserted, modified = row
        vacuum_at = o["autovacuum_vacuum_threshold"] + o["autovacuum_vacuum_scale_factor"] * live
        insert_at = (
            o["autovacuum_vacuum_insert_threshold"]
            + o["autovacuum_vacuum_insert_scale_factor"] * live
        )
        analyze_at = o["autovacuum_analyze_threshold"] + o["autovacuum_analyze_scale_factor"] * live
        if dead > vacuum_at or inserted > insert_at:
            conn.execute(f"VACUUM {self.table}")
            self.vacuums += 1
        if modified > analyze_at:
            conn.execute(f"ANALYZE {self.table}")
            self.analyzes += 1


def _seconds(setting: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}
    for unit in sorted(units, key=len, reverse=True):
        if setting.endswith(unit):
            return float(setting[: -len(unit)]) * units[unit]
    return float(setting)


# -- one minute's figures ---------------------------------------------------------------------


class Sampler:
    def __init__(self, database: str, table: str, workers: common.Workers, latency: Path) -> None:
        self.conn = common.connect(database)
        self.conn.autocommit = True
        self.table, self.workers, self.latency = table, workers, latency
        self.offset = 0
        first = self._stats()
        self.deleted, self.vacuums = first["n_tup_del"], first["vacuums"]
        self.at = time.perf_counter()
        self.waits: list[list[float]] = []

    def _stats(self) -> dict[str, Any]:
        cur = self.conn.execute(
            "SELECT n_tup_del, n_live_tup, n_dead_tup, vacuum_count + autovacuum_count, "
            "pg_table_size(relid), pg_indexes_size(relid) FROM pg_stat_user_tables "
            "WHERE relname = %s", [self.table]
        )  # fmt: skip
        keys = ("n_tup_del", "live", "dead", "vacuums", "table_bytes", "index_bytes")
        return dict(zip(keys, cur.fetchone() or (0,) * 6, strict=True))

    def minute(self, index: int) -> dict[str, Any]:
        stats = self._stats()
        now = time.perf_counter()
        with self.latency.open() as f:
            f.seek(self.offset)
            lines = f.read().splitlines(keepends=True)
        complete = [line for line in lines if line.endswith("\n")]
        self.offset += sum(len(line) for line in complete)
        waits = [(float(b) - float(a)) * 1000 for a, b in (line.split() for line in complete)]
        self.waits.append(waits)
        rss = [p.memory_info().rss / 2**20 for p in self.workers.leaves() if p.is_running()]
        row = {
            "minute": index + 1,
            "jobs_per_s": (stats["n_tup_del"] - self.deleted) / (now - self.at),
            "pickup_p50_ms": common.percentile(waits, 50) if waits else None,
            "pickup_p99_ms": common.percentile(waits, 99) if waits else None,
            "samples": len(waits),
            "pending": stats["live"],
            "dead_tuples": stats["dead"],
            "vacuums": stats["vacuums"] - self.vacuums,
            "table_mb": stats["table_bytes"] / 2**20,
            "index_mb": stats["index_bytes"] / 2**20,
            "worker_rss_mb": rss,
            "loadavg": os.getloadavg()[0],
        }
        self.deleted, self.vacuums, self.at = stats["n_tup_del"], stats["vacuums"], now
        return row


# -- the run ----------------------------------------------------------------------------------


def capacity(system: Any, config: Any, n: int, reps: int) -> dict[str, Any]:
    from . import measure

    runs = [measure.drain(system, n, 2, config, f"soak-capacity-r{r}") for r in range(reps)]
    return {"n": n, **common.figure([r["jobs_per_s"] for r in runs])}


def soak(system: Any, config: Any, table: str, rate: float, minutes: int) -> dict[str, Any]:
    from . import measure

    system.reset()
    latency = common.RESULTS / "logs" / "soak-latency.txt"
    latency.parent.mkdir(parents=True, exist_ok=True)
    latency.write_text("")
    workers = measure.start_workers(system, 2, config, "soak", BENCH_LATENCY_FILE=str(latency))
    rows: list[dict[str, Any]] = []
    try:
        latency.write_text("")
        env = common.python_env(SETTINGS, BENCH_DATABASE_URL=common.db_url(system.database))
        seconds = minutes * 60.0
        enqueuers = [
            subprocess.Popen([common.PYTHON, "-m", "bench.soak", "--enqueue", str(rate / 2),
                              "--seconds", str(seconds), "--first", str(k * 10**9)],
                             cwd=common.ROOT, env=env, stdout=subprocess.PIPE, text=True)
            for k in range(2)
        ]  # fmt: skip
        sampler = Sampler(system.database, table, workers, latency)
        started = time.perf_counter()
        with Autovacuum(system.database, table) as autovacuum:
            for m in range(minutes):
                time.sleep(max(0.0, started + (m + 1) * 60 - time.perf_counter()))
                rows.append(sampler.minute(m))
                _print_row(rows[-1])
                if not workers.alive():
                    raise RuntimeError(f"a worker exited:\n{workers.tail()}")
        sent = [json.loads(p.communicate(timeout=120)[0].splitlines()[-1]) for p in enqueuers]
        waits = sampler.waits
    finally:
        workers.stop()
    return {"rows": rows, "sent": sent, "waits": waits, "autovacuum": {
        "server": autovacuum.server_on, "naptime_s": autovacuum.naptime,
        "options": autovacuum.options, "vacuums": autovacuum.vacuums,
        "analyzes": autovacuum.analyzes}}  # fmt: skip


def _print_row(r: dict[str, Any]) -> None:
    print(f"minute {r['minute']:>2}: {r['jobs_per_s']:8.0f} jobs/s, pickup p99 "
          f"{r['pickup_p99_ms'] or 0:7.1f} ms, dead {r['dead_tuples']:>8}, table "
          f"{r['table_mb']:6.1f} MB, indexes {r['index_mb']:6.1f} MB, RSS "
          f"{', '.join(f'{v:.1f}' for v in r['worker_rss_mb'])} MB, load {r['loadavg']:.1f}",
          flush=True)  # fmt: skip


# -- the targets ------------------------------------------------------------------------------


def _window(out: dict[str, Any]) -> int:
    """The minutes compared at each end: 5, or half a shorter run."""
    return max(1, min(5, len(out["rows"]) // 2))


def window_p99(out: dict[str, Any]) -> list[float]:
    """The pickup p99 of the first and of the last window, each from its pooled samples (kept
    in results/soak.json, whose samples are not, so that `--render` can judge again)."""
    waits, k = out["waits"], _window(out)

    def p99(ws: list[list[float]]) -> float:
        pooled = [w for m in ws for w in m]
        return common.percentile(pooled, 99) if pooled else float("nan")

    return [p99(waits[:k]), p99(waits[-k:])]


def targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Last window against first (5 minutes each, or half a shorter run)."""
    rows = out["rows"]
    k = _window(out)
    first, last = rows[:k], rows[-k:]

    def mean(rs: list[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in rs) / len(rs)

    t1, t2 = mean(first, "jobs_per_s"), mean(last, "jobs_per_s")
    p1, p2 = out["window_p99_ms"]
    rss1 = max(rows[0]["worker_rss_mb"], default=0.0)
    rss2 = max(rows[-1]["worker_rss_mb"], default=0.0)
    d1 = max(r["dead_tuples"] for r in first)
    d2 = max(r["dead_tuples"] for r in last)
    av = out["autovacuum"]
    # What one autovacuum visit per naptime lets pile up, twice over.
    allowance = 2 * (av["options"]["autovacuum_vacuum_threshold"] + out["rate"] * av["naptime_s"])
    return [
        # Within 10% in the direction of wear: a last window faster than a first one that
        # still warmed up (cold caches, first plans) is no sign of decay.
        _target(f"throughput, last {k} min no more than 10% below the first {k}",
                f"{t2:,.0f} against {t1:,.0f} jobs/s ({t2 / t1 - 1:+.1%})",
                t2 / t1 - 1 >= -WITHIN),
        _target(f"pickup p99, last {k} min no more than 10% above the first {k}",
                f"{p2:.1f} against {p1:.1f} ms ({p2 / p1 - 1:+.1%})",
                p2 / p1 - 1 <= WITHIN),
        _target(f"worker RSS growth < {RSS_GROWTH_MB:.0f} MB (largest worker, minute 1 to last)",
                f"{rss1:.1f} to {rss2:.1f} MB ({rss2 - rss1:+.1f} MB)",
                rss2 - rss1 < RSS_GROWTH_MB),
        _target(f"dead tuples bounded (peak of the last {k} min <= 1.5x the first {k}'s, or "
                f"<= {allowance:,.0f}: two naptimes of autovacuum's allowance)",
                f"{d2:,} against {d1:,}", d2 <= max(1.5 * d1, allowance)),
    ]  # fmt: skip


def _target(target: str, measured: str, ok: bool) -> dict[str, Any]:
    return {"target": target, "measured": measured, "ok": ok}


# -- outputs ----------------------------------------------------------------------------------


def plot(out: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = out["rows"]
    x = [r["minute"] for r in rows]
    fig, axes = plt.subplots(5, 1, figsize=(8, 11), sharex=True)
    series = [
        ("jobs/s", [("throughput", [r["jobs_per_s"] for r in rows])]),
        ("pickup p99 ms", [("p99", [r["pickup_p99_ms"] for r in rows])]),
        ("dead tuples", [("dead tuples", [r["dead_tuples"] for r in rows])]),
        ("MB", [("table", [r["table_mb"] for r in rows]),
                ("indexes", [r["index_mb"] for r in rows])]),
        ("worker RSS MB", [(f"worker {i + 1}", [_at(r["worker_rss_mb"], i) for r in rows])
                           for i in range(2)]),
    ]  # fmt: skip
    for ax, (label, lines) in zip(axes, series, strict=True):
        for name, ys in lines:
            ax.plot(x, ys, marker="o", markersize=3, label=name)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        if len(lines) > 1:
            ax.legend(loc="lower right", fontsize=8)
    axes[-1].set_xlabel("minute")
    fig.suptitle(f"make soak: {len(rows)} min at {out['rate']:,.0f} jobs/s "
                 f"(50% of the 2-process drain), {out['started']}", fontsize=10)  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _at(values: list[float], i: int) -> float | None:
    return values[i] if i < len(values) else None


def markdown(out: dict[str, Any]) -> str:
    cap, av = out["capacity"], out["autovacuum"]
    verdict = {True: "met", False: "missed"}
    lines = [
        f"Run of {out['started']} (`{out['command']}`), {out['minutes']} minutes. Drain capacity "
        f"first, in the same run: {cap['median']:,.0f} jobs/s (min {cap['min']:,.0f}, max "
        f"{cap['max']:,.0f}; {cap['n']} drains of {cap.get('jobs', CAPACITY_N):,} jobs with "
        f"2 processes, {out['config']}); the soak enqueued at half of it, "
        f"{out['rate']:,.0f} jobs/s, from 2 processes (`enqueue_many` every {TICK * 1000:.0f} ms), "
        f"and sent {sum(s['sent'] for s in out['sent']):,} jobs. Load average around the run: "
        f"{out['load_before'][0]:.1f} before, {out['load_after'][0]:.1f} after"
        + (" (other suites ran on the machine meanwhile: the figures carry their noise)."
           if max(out["load_before"][0], out["load_after"][0]) > 2 else ".")
        + (f" The capacity's drains ranged {cap['min']:,.0f} to {cap['max']:,.0f} jobs/s: at "
           "times the machine drained little more than the soak's rate, and a backlog then "
           "shows as seconds of pickup latency." if cap["min"] < 1.2 * out["rate"] else ""),
        "",
        "Autovacuum: " + (
            "on in the server; the table's settings from the migration applied."
            if av["server"] else
            f"the server runs with `autovacuum = off`, which a table's storage parameters cannot "
            f"override, so the script applied autovacuum's rule with the table's parameters from "
            f"our migration (vacuum past {av['options']['autovacuum_vacuum_threshold']:,.0f} dead "
            f"or {av['options']['autovacuum_vacuum_insert_threshold']:,.0f} inserted rows) once "
            f"per naptime ({av['naptime_s']:.0f} s, the server's): {av['vacuums']} VACUUMs, "
            f"{av['analyzes']} ANALYZEs. The vacuums column counts every VACUUM of the table in "
            f"that minute, the worker leader's own (`VACUUM_DEAD_TUPLES`) included."),
        "",
        "| target | measured | |",
        "|---|---|---|",
        *(f"| {t['target']} | {t['measured']} | {verdict[t['ok']]} |" for t in out["targets"]),
        "",
        "| minute | jobs/s | pickup p50 / p99 ms | pending | dead tuples | vacuums | table MB "
        "| indexes MB | worker RSS MB | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {r['minute']} | {r['jobs_per_s']:,.0f} | {r['pickup_p50_ms'] or 0:.1f} / "
          f"{r['pickup_p99_ms'] or 0:.1f} | {r['pending']:,} | {r['dead_tuples']:,} | "
          f"{r['vacuums']} | {r['table_mb']:.1f} | {r['index_mb']:.1f} | "
          f"{' / '.join(f'{v:.1f}' for v in r['worker_rss_mb'])} | {r['loadavg']:.1f} |"
          for r in out["rows"]),
        "",
        f"![make soak, per minute](images/{IMAGE.name})",
    ]  # fmt: skip
    return "\n".join(lines)


def write_docs(section: str) -> None:
    """Replace the soak section of docs/benchmarks.md (between its markers)."""
    text = DOCS.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOCS.write_text(f"{head}{START}\n{section}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=int(os.environ.get("SOAK_MINUTES", "30")))
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument(
        "--render", action="store_true", help="rewrite the outputs from results/soak.json"
    )
    parser.add_argument("--enqueue", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.enqueue is not None:
        return enqueuer(args.enqueue, args.seconds, args.first)
    if args.render:
        return render()
    if args.minutes < 2:
        sys.exit("--minutes: at least 2 (the targets compare the first and the last minutes)")
    run(args.minutes, docs=not args.no_docs)


def render() -> None:
    """Judge results/soak.json again by the current targets, and rewrite the outputs."""
    path = common.RESULTS / "soak.json"
    out = json.loads(path.read_text())
    out["targets"] = targets(out)
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")
    write_outputs(out, True)


def run(minutes: int, docs: bool) -> None:
    from .run import _now

    database = common.PREFIX + "soak"
    common.wait_for_server()
    common.create_database(database)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ["BENCH_DATABASE_URL"] = common.db_url(database)
    import django

    django.setup()
    from django.core.management import call_command

    from django_alkqueue.models import QueueMessage

    from .systems import Config
    from .systems.alkqueue import AlkQueue

    call_command("migrate", verbosity=0)
    system = AlkQueue()
    system.database = database
    config = Config("the package defaults (4 threads, claims sized by the worker), -v 0",
                    {"concurrency": 4, "batch": None})  # fmt: skip
    out: dict[str, Any] = {"started": _now(), "minutes": minutes, "config": config.label,
                           "command": f"make soak SOAK_MINUTES={minutes}",
                           "load_before": os.getloadavg()}  # fmt: skip
    print(f"soak: drain capacity, {CAPACITY_REPS} drains of {CAPACITY_N:,} jobs", flush=True)
    out["capacity"] = {**capacity(system, config, CAPACITY_N, CAPACITY_REPS), "jobs": CAPACITY_N}
    out["rate"] = out["capacity"]["median"] / 2
    print(f"soak: {minutes} min at {out['rate']:,.0f} jobs/s", flush=True)
    out.update(soak(system, config, QueueMessage._meta.db_table, out["rate"], minutes))
    out["load_after"] = os.getloadavg()
    out["window_p99_ms"] = window_p99(out)
    out["targets"] = targets(out)
    for t in out["targets"]:
        print(f"{'met   ' if t['ok'] else 'MISSED'} {t['target']}: {t['measured']}", flush=True)
    waits = out.pop("waits")
    out["pickup_samples"] = sum(len(w) for w in waits)
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    (common.RESULTS / "soak.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    common.drop_database(database)
    write_outputs(out, docs)


def write_outputs(out: dict[str, Any], docs: bool) -> None:
    """results/soak.md, the plot and (with `docs`) the section of docs/benchmarks.md."""
    section = markdown(out)
    (common.RESULTS / "soak.md").write_text(section + "\n")
    plot(out, IMAGE)
    if docs:
        write_docs(section)
    print(f"wrote bench/results/soak.json, soak.md, {IMAGE.relative_to(common.ROOT)}"
          + (", docs/benchmarks.md" if docs else ""), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
