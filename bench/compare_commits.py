"""Two commits of django-alkqueue side by side, driven by this harness (issue 31's verdict).

    bench/.venv/bin/python -m bench.compare_commits --old ../wt-old [--new .] [--reps 3]

`--old` and `--new` are checkouts (e.g. `git worktree add --detach ../wt-old COMMIT`). Each
gets a tree of its own, a temporary directory holding a link to its `django_alkqueue` and a
copy of this `bench/`, and a database of its own (`bench_cmp_old_alkqueue`, ...): the same
harness code, the same interpreter and packages, only the library differs. Every
measurement runs in a child process whose working directory and PYTHONPATH are that tree.

- CPU per operation: valgrind's callgrind counts the instructions of each operation (single
  enqueue, enqueue_many, claim + ack_batch, the worker's drain), the same for the same code
  and inputs whatever else the machine runs. Each is run twice, with a small and a larger
  number of jobs, and the difference is divided by the difference in jobs, so start-up,
  warm-up and seeding cancel out.
- Rates: drains with 1 and 2 processes, enqueue rates, pickup latency, with the repetitions
  of the two commits interleaved (old, new, new, old, ...) so that a drift in the machine's
  load weighs on both alike; medians with min and max.

Writes results/compare.json and results/compare.md (the table: figure, old, new, ratio,
verdict; a figure more than 10% worse than before fails).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import common

SIDES = ("old", "new")
TOLERANCE = 0.10
#: Callgrind runs: (low, high) jobs per operation; per-job Ir = (Ir_high - Ir_low) / (high - low).
CPU_RUNS = {
    "enqueue": (300, 1_300),
    "enqueue_many": (2_000, 12_000),
    "claim_ack": (1_000, 5_000),
    "worker": (1_000, 5_000),
}
#: The worker configurations: the default shape (one job per handler call) and the fastest
#: of the last full run (a batch consumer).
CONFIGS = {
    "per-job": {"concurrency": 4, "batch": 200},
    "batch": {"concurrency": 2, "batch": 2000, "ack_window": 0.0, "consumer_batch": 1000},
}
CLAIM = 100
N_DRAIN, N_SINGLE, N_BULK = 20_000, 5_000, 20_000


# -- the child: one measurement, in the tree of one commit --------------------------------------


def child(op: str, n: int, config: str) -> dict[str, Any]:
    import django

    django.setup()
    from . import measure
    from .systems import Config
    from .systems.alkqueue import AlkQueue

    system = AlkQueue()
    cfg = Config(config, CONFIGS.get(config, {}))
    if op == "install":
        import django_alkqueue

        system.install()
        return {"library": str(Path(django_alkqueue.__file__).resolve().parent)}
    if op == "seed":
        system.reset()
        system.seed(measure.payloads(n), cfg)
        return {}
    if op in ("enqueue", "enqueue_many", "claim_ack"):
        return _cpu_op(system, op, n)
    if op == "drain1":
        return measure.drain(system, n, 1, cfg, f"cmp-{config}-p1")
    if op == "drain2":
        return measure.drain(system, n, 2, cfg, f"cmp-{config}-p2")
    if op in ("enqueue_one", "enqueue_bulk"):
        return measure.enqueue(system, op, n, 1)
    if op == "latency":
        return measure.latency(system, cfg, 200, 0.02)
    raise ValueError(op)


def _cpu_op(system: Any, op: str, n: int) -> dict[str, Any]:
    """`n` jobs through one public call, after a warm-up; the same warm-up and seed whatever
    `n`, so that they cancel out between the low and the high run."""
    from django.db import transaction

    from django_alkqueue import queue

    from . import measure

    q = queue("bench")
    system.reset()
    if op == "enqueue":
        for payload in measure.payloads(200, start=10**9):
            q.enqueue(payload)
        for payload in measure.payloads(n):
            q.enqueue(payload)
    elif op == "enqueue_many":
        q.enqueue_many(measure.payloads(200, start=10**9))
        q.enqueue_many(measure.payloads(n))
    else:
        high = max(CPU_RUNS["claim_ack"])
        with transaction.atomic():
            q.enqueue_many(measure.payloads(high + 10 * CLAIM))
        for _ in range(10 + n // CLAIM):
            q.ack_batch([h.job.id for h in q.claim("bench-cpu", CLAIM)])
    system.reset()
    return {}


# -- the parent: trees, children, tables ----------------------------------------------------------


class Side:
    """One commit: its tree, database and environment."""

    def __init__(self, name: str, checkout: Path, root: Path) -> None:
        self.name, self.checkout = name, checkout.resolve()
        self.tree = root / name
        self.tree.mkdir()
        (self.tree / "django_alkqueue").symlink_to(self.checkout / "django_alkqueue")
        ignore = shutil.ignore_patterns(".venv", "results", "__pycache__")
        shutil.copytree(common.BENCH, self.tree / "bench", ignore=ignore)
        self.database = f"bench_cmp_{name}_alkqueue"
        self.commit = _git(self.checkout, "rev-parse", "--short", "HEAD")

    def env(self, config: str = "") -> dict[str, str]:
        env = common.python_env("bench.settings.alkqueue", PYTHONHASHSEED="0",
                                BENCH_DB_PREFIX=f"bench_cmp_{self.name}_",
                                BENCH_DATABASE_URL=common.db_url(self.database))  # fmt: skip
        env["PYTHONPATH"] = str(self.tree)
        options = CONFIGS.get(config, {})
        if "ack_window" in options:
            env["BENCH_ACK_WINDOW"] = str(options["ack_window"])
        if options.get("consumer_batch"):
            env["BENCH_CONSUMER_BATCH"] = str(options["consumer_batch"])
        return env

    def run(self, op: str, n: int = 0, config: str = "", prefix: tuple[str, ...] = ()) -> Any:
        cmd = [*prefix, sys.executable, "-m", "bench.compare_commits", "--child", op,
               "--n", str(n), "--config", config]  # fmt: skip
        out = subprocess.run(cmd, cwd=self.tree, env=self.env(config), capture_output=True,
                             text=True)  # fmt: skip
        if out.returncode:
            raise RuntimeError(f"{self.name} {op} {n}: exit {out.returncode}\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def callgrind(self, op: str, n: int, out_dir: Path) -> int:
        """Instructions (Ir) of one child run under callgrind; the worker's drain is the
        `alk_worker --burst` command over `n` seeded jobs."""
        out = out_dir.resolve() / f"callgrind.{self.name}.{op}.{n}"
        grind = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}")
        if op != "worker":
            self.run(op, n, prefix=grind)
            return _ir(out)
        config = "per-job"
        self.run("seed", n, config)
        o = CONFIGS[config]
        cmd = [*grind, sys.executable, "-m", "django", "alk_worker", "--queue", "bench",
               "--burst", "--concurrency", str(o["concurrency"]), "--batch", str(o["batch"]),
               "-v", "0"]  # fmt: skip
        subprocess.run(cmd, cwd=self.tree, env=self.env(config), check=True,
                       capture_output=True)  # fmt: skip
        return _ir(out)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True).stdout.strip()


def _ir(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


@contextmanager
def sides(old: Path, new: Path) -> Iterator[dict[str, Side]]:
    root = Path(tempfile.mkdtemp(prefix="alk-compare-"))
    made = {"old": Side("old", old, root), "new": Side("new", new, root)}
    try:
        for side in made.values():
            common.create_database(side.database)
            side.library = side.run("install")["library"]  # type: ignore[attr-defined]
        yield made
    finally:
        for side in made.values():
            common.drop_database(side.database)
        shutil.rmtree(root)


def cpu(made: dict[str, Side], out_dir: Path) -> dict[str, dict[str, float]]:
    """Ir per job, by operation and side."""
    result: dict[str, dict[str, float]] = {}
    for op, (low, high) in CPU_RUNS.items():
        result[op] = {}
        for side in made.values():
            irs = [side.callgrind(op, n, out_dir) for n in (low, high)]
            result[op][side.name] = (irs[1] - irs[0]) / (high - low)
            print(f"cpu {op} {side.name}: {result[op][side.name]:,.0f} Ir/job", flush=True)
    return result


RATES: dict[str, tuple[str, int, str, Callable[[dict[str, Any]], float]]] = {
    "drain, 1 process, per-job consumer (jobs/s)": ("drain1", N_DRAIN, "per-job", lambda r: r["jobs_per_s"]),
    "drain, 2 processes, per-job consumer (jobs/s)": ("drain2", N_DRAIN, "per-job", lambda r: r["jobs_per_s"]),
    "drain, 1 process, batch consumer (jobs/s)": ("drain1", N_DRAIN, "batch", lambda r: r["jobs_per_s"]),
    "drain, 2 processes, batch consumer (jobs/s)": ("drain2", N_DRAIN, "batch", lambda r: r["jobs_per_s"]),
    "worker CPU per job, 1 process, per-job consumer (ms)": ("drain1", N_DRAIN, "per-job", lambda r: r["cpu_ms_per_job"]),
    "single enqueue (jobs/s)": ("enqueue_one", N_SINGLE, "", lambda r: r["jobs_per_s"]["median"]),
    "enqueue_many (jobs/s)": ("enqueue_bulk", N_BULK, "", lambda r: r["jobs_per_s"]["median"]),
    "pickup latency p50, per-job consumer (ms)": ("latency", 0, "per-job", lambda r: r["p50_ms"]),
    "pickup latency p95, per-job consumer (ms)": ("latency", 0, "per-job", lambda r: r["p95_ms"]),
}  # fmt: skip


def rates(made: dict[str, Side], reps: int) -> dict[str, dict[str, dict[str, Any]]]:
    """Each measurement's repetitions, the commits taking turns (the order flips each time)."""
    runs: dict[tuple[str, int, str], dict[str, list[dict[str, Any]]]] = {}
    for op, n, config, _ in RATES.values():
        key = (op, n, config)
        if key in runs:
            continue
        runs[key] = {"old": [], "new": []}
        for rep in range(reps):
            for name in SIDES if rep % 2 == 0 else SIDES[::-1]:
                runs[key][name].append(made[name].run(op, n, config))
            print(f"{op} {config} repetition {rep + 1} done", flush=True)
    return {label: {name: common.figure([pick(r) for r in runs[(op, n, config)][name]])
                    for name in SIDES}
            for label, (op, n, config, pick) in RATES.items()}  # fmt: skip


def lower_is_better(label: str) -> bool:
    return "jobs/s" not in label


def table(cpu_ir: dict[str, dict[str, float]], rate: dict[str, dict[str, Any]]) -> str:
    rows = ["| figure | old | new | new / old | verdict |", "|---|---:|---:|---:|---|"]

    def row(label: str, old: float, new: float, old_s: str, new_s: str) -> None:
        worse = (new / old if lower_is_better(label) else old / new) - 1
        verdict = f"worse by {worse:.0%}: FAILS" if worse > TOLERANCE else "ok"
        rows.append(f"| {label} | {old_s} | {new_s} | {new / old:.2f} | {verdict} |")

    names = {"enqueue": "single enqueue", "enqueue_many": "enqueue_many, per job",
             "claim_ack": f"claim {CLAIM} + ack_batch, per job",
             "worker": "worker's drain (alk_worker --burst), per job"}  # fmt: skip
    for op, by in cpu_ir.items():
        label = f"CPU: {names[op]} (Ir, callgrind)"
        row(label, by["old"], by["new"], f"{by['old']:,.0f}", f"{by['new']:,.0f}")
    for label, by in rate.items():
        o, n = by["old"], by["new"]
        row(label, o["median"], n["median"], _spread(o), _spread(n))
    return "\n".join(rows) + "\n"


def _spread(f: dict[str, Any]) -> str:
    digits = 0 if f["median"] >= 100 else 2
    return f"{f['median']:,.{digits}f} ({f['min']:,.{digits}f}-{f['max']:,.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old")
    parser.add_argument("--new", default=str(common.ROOT))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-cpu", action="store_true")
    parser.add_argument("--skip-rates", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--config", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.config), default=str))
        return
    if not args.old:
        parser.error("--old is required")
    # SIGTERM / SIGINT unwind like an error: the trees and databases are removed.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: sys.exit(1))
    out_dir = common.RESULTS / "compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    with sides(Path(args.old), Path(args.new)) as made:
        record: dict[str, Any] = {
            "command": " ".join(["python -m bench.compare_commits", *sys.argv[1:]]),
            "commits": {s.name: s.commit for s in made.values()},
            "libraries": {s.name: s.library for s in made.values()},  # type: ignore[attr-defined]
            "load_before": os.getloadavg(),
        }
        print(record, flush=True)
        record["cpu_ir_per_job"] = {} if args.skip_cpu else cpu(made, out_dir)
        record["rates"] = {} if args.skip_rates else rates(made, args.reps)
        record["load_after"] = os.getloadavg()
    md = table(record["cpu_ir_per_job"], record["rates"])
    (common.RESULTS / "compare.json").write_text(json.dumps(record, indent=1))
    (common.RESULTS / "compare.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
