"""Commits of django-alkqueue side by side, driven by this harness (issue 31's verdict).

    bench/.venv/bin/python -m bench.compare_commits --side old=../wt-old --side new=. [--reps 3]

Each `--side NAME=CHECKOUT` (e.g. `git worktree add --detach ../wt-old COMMIT`) gets a tree
of its own, a temporary directory holding a link to its `django_alkqueue` and a copy of this
`bench/`, and a database of its own (`bench_cmp_NAME_alkqueue`): the same harness code, the
same interpreter and packages, only the library differs. Every measurement runs in a child
process whose working directory and PYTHONPATH are that tree. The first side is the
baseline the others are compared with.

- CPU per operation: valgrind's callgrind counts the instructions (Ir) of each operation,
  the same for the same code and inputs whatever else the machine runs. One process per
  side runs each operation N times inside `sys.call_tracing()`, which callgrind is told to
  zero before and dump after: a dump per operation, start-up and warm-up left out. The
  worker's drain (`alk_worker --burst`) is run twice, over a small and a larger number of
  jobs, and the difference is divided by the difference in jobs.
- Rates: drains with 1 and 2 processes, enqueue rates, pickup latency, the sides' repetitions
  interleaved (the order turning each time) so that a drift in the machine's load weighs on
  all alike; medians with min and max.

Writes results/compare.json and results/compare.md (the table: figure, each side, each
side over the baseline, verdict; a figure more than 10% worse than the baseline fails).
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

TOLERANCE = 0.10
#: Jobs per operation counted by callgrind, each after a warm-up of its own.
CPU_OPS = {"enqueue": 1_000, "enqueue_many": 10_000, "claim_ack": 5_000}
#: The worker's drains under callgrind: (low, high) jobs.
WORKER_RUNS = (500, 2_500)
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
    if op == "cpu":
        return _cpu_ops(system)
    if op == "drain1":
        return measure.drain(system, n, 1, cfg, f"cmp-{config}-p1")
    if op == "drain2":
        return measure.drain(system, n, 2, cfg, f"cmp-{config}-p2")
    if op in ("enqueue_one", "enqueue_bulk"):
        return measure.enqueue(system, op, n, 1)
    if op == "latency":
        return measure.latency(system, cfg, 200, 0.02)
    raise ValueError(op)


def _cpu_ops(system: Any) -> dict[str, Any]:
    """Each operation of CPU_OPS after a warm-up of its own, inside sys.call_tracing(): the
    mark callgrind zeroes its counts before and dumps them after."""
    from django.db import transaction

    from django_alkqueue import queue

    from . import measure

    q = queue("bench")

    def enqueue(payloads: list[dict[str, Any]]) -> None:
        for payload in payloads:
            q.enqueue(payload)

    def claim_ack(rounds: int) -> None:
        for _ in range(rounds):
            q.ack_batch([h.job.id for h in q.claim("bench-cpu", CLAIM)])

    for op, n in CPU_OPS.items():
        system.reset()
        if op == "enqueue":
            enqueue(measure.payloads(200, start=10**9))
            sys.call_tracing(enqueue, (measure.payloads(n),))
        elif op == "enqueue_many":
            q.enqueue_many(measure.payloads(200, start=10**9))
            sys.call_tracing(q.enqueue_many, (measure.payloads(n),))
        else:
            with transaction.atomic():
                q.enqueue_many(measure.payloads(n + 10 * CLAIM))
            claim_ack(10)
            sys.call_tracing(claim_ack, (n // CLAIM,))
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
        self.prefix = f"{common.PREFIX}cmp_{name}_"  # BENCH_DB_PREFIX: another run beside
        self.database = self.prefix + "alkqueue"
        dirty = _git(self.checkout, "status", "--porcelain", "django_alkqueue")
        self.commit = _git(self.checkout, "rev-parse", "--short", "HEAD") + (" +" if dirty else "")

    def env(self, config: str = "") -> dict[str, str]:
        env = common.python_env("bench.settings.alkqueue", PYTHONHASHSEED="0",
                                BENCH_DB_PREFIX=self.prefix,
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

    def cpu(self, out_dir: Path) -> dict[str, float]:
        """Ir per job of each operation of CPU_OPS, one callgrind dump each."""
        out = out_dir.resolve() / f"callgrind.{self.name}.ops"
        for old in out_dir.glob(out.name + "*"):
            old.unlink()
        self.run("cpu", prefix=("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                "--zero-before=sys_call_tracing",
                                "--dump-after=sys_call_tracing"))  # fmt: skip
        dumps = [out.with_name(f"{out.name}.{i + 1}") for i in range(len(CPU_OPS) + 1)]
        if not dumps[-2].exists() or dumps[-1].exists():
            raise RuntimeError(f"expected {len(CPU_OPS)} callgrind dumps beside {out}")
        return {op: _ir(dump) / n for (op, n), dump in zip(CPU_OPS.items(), dumps, strict=False)}

    def worker_ir(self, n: int, out_dir: Path) -> int:
        """Instructions of `alk_worker --burst` (one process, the per-job consumer) draining
        `n` seeded jobs, start-up and shutdown included."""
        out = out_dir.resolve() / f"callgrind.{self.name}.worker.{n}"
        config = "per-job"
        self.run("seed", n, config)
        o = CONFIGS[config]
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
               "-m", "django", "alk_worker", "--queue", "bench", "--burst", "--concurrency",
               str(o["concurrency"]), "--batch", str(o["batch"]), "-v", "0"]  # fmt: skip
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
def sides(checkouts: dict[str, Path]) -> Iterator[dict[str, Side]]:
    root = Path(tempfile.mkdtemp(prefix="alk-compare-"))
    made = {name: Side(name, path, root) for name, path in checkouts.items()}
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
    result: dict[str, dict[str, float]] = {op: {} for op in [*CPU_OPS, "worker"]}
    low, high = WORKER_RUNS
    for side in made.values():
        for op, ir in side.cpu(out_dir).items():
            result[op][side.name] = ir
        irs = [side.worker_ir(n, out_dir) for n in WORKER_RUNS]
        result["worker"][side.name] = (irs[1] - irs[0]) / (high - low)
        done = ", ".join(f"{op} {by[side.name]:,.0f}" for op, by in result.items())
        print(f"cpu {side.name}: {done}", flush=True)
    return result


def _rate(r: dict[str, Any]) -> float:
    return float(r["jobs_per_s"])


def _median_rate(r: dict[str, Any]) -> float:
    return float(r["jobs_per_s"]["median"])


def _key(name: str) -> Callable[[dict[str, Any]], float]:
    return lambda r: float(r[name])


#: label -> (child op, jobs, worker configuration, the figure taken from its result).
RATES: dict[str, tuple[str, int, str, Callable[[dict[str, Any]], float]]] = {
    "drain, 1 process, per-job consumer (jobs/s)": ("drain1", N_DRAIN, "per-job", _rate),
    "drain, 2 processes, per-job consumer (jobs/s)": ("drain2", N_DRAIN, "per-job", _rate),
    "drain, 1 process, batch consumer (jobs/s)": ("drain1", N_DRAIN, "batch", _rate),
    "drain, 2 processes, batch consumer (jobs/s)": ("drain2", N_DRAIN, "batch", _rate),
    "worker CPU per job, 1 process, per-job consumer (ms)": (
        "drain1",
        N_DRAIN,
        "per-job",
        _key("cpu_ms_per_job"),
    ),
    "single enqueue (jobs/s)": ("enqueue_one", N_SINGLE, "", _median_rate),
    "enqueue_many (jobs/s)": ("enqueue_bulk", N_BULK, "", _median_rate),
    "pickup latency p50, batch consumer (ms)": ("latency", 0, "batch", _key("p50_ms")),
    "pickup latency p95, batch consumer (ms)": ("latency", 0, "batch", _key("p95_ms")),
}


#: The measurements of a --short run: the batch consumer's drains (the headline figures),
#: the enqueues and the latency; the per-job drains take most of a full run's time.
SHORT = [label for label in RATES if "per-job consumer (jobs/s)" not in label
         and not label.startswith("worker CPU")]  # fmt: skip


def rates(
    made: dict[str, Side], reps: int, labels: list[str], scale: float, errors: list[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Each measurement's repetitions, the sides taking turns (the order turning each time);
    `scale` multiplies the jobs of each."""
    names = list(made)
    chosen = {label: RATES[label] for label in labels}
    chosen = {k: (op, int(n * scale), c, pick) for k, (op, n, c, pick) in chosen.items()}
    runs: dict[tuple[str, int, str], dict[str, list[dict[str, Any]]]] = {}
    for op, n, config, _ in chosen.values():
        key = (op, n, config)
        if key in runs:
            continue
        runs[key] = {name: [] for name in names}
        for rep in range(reps):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                try:
                    runs[key][name].append(made[name].run(op, n, config))
                except RuntimeError as exc:  # recorded; the other repetitions go on
                    errors.append(str(exc)[-2000:])
                    print(f"FAILED: {str(exc)[:300]}", flush=True)
            print(f"{op} {config} repetition {rep + 1} done", flush=True)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label, (op, n, config, pick) in chosen.items():
        done = {name: runs[(op, n, config)][name] for name in names}
        if all(done.values()):
            out[label] = {name: common.figure([pick(r) for r in done[name]]) for name in names}
    return out


def lower_is_better(label: str) -> bool:
    return "jobs/s" not in label


def table(names: list[str], cpu_ir: dict[str, dict[str, float]],
          rate: dict[str, dict[str, Any]]) -> str:  # fmt: skip
    base, others = names[0], names[1:]
    head = ["figure", *names, *(f"{n} / {base}" for n in others), "verdict"]
    rows = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]

    def row(label: str, values: dict[str, float], shown: dict[str, str]) -> None:
        ratios, verdicts = [], []
        for name in others:
            ratio = values[name] / values[base]
            worse = (ratio if lower_is_better(label) else 1 / ratio) - 1
            ratios.append(f"{ratio:.2f}")
            if worse > TOLERANCE:
                verdicts.append(f"{name}: worse by {worse:.0%}")
        verdict = "; ".join(verdicts) or "ok"
        rows.append("| " + " | ".join([label, *(shown[n] for n in names), *ratios, verdict])
                    + " |")  # fmt: skip

    titles = {"enqueue": "single enqueue", "enqueue_many": "enqueue_many, per job",
              "claim_ack": f"claim {CLAIM} + ack_batch, per job",
              "worker": "worker's drain (alk_worker --burst), per job"}  # fmt: skip
    for op, by in cpu_ir.items():
        row(f"CPU: {titles[op]} (Ir)", by, {n: f"{by[n]:,.0f}" for n in names})
    for label, by in rate.items():
        row(label, {n: by[n]["median"] for n in names}, {n: _spread(by[n]) for n in names})
    return "\n".join(rows) + "\n"


def _spread(f: dict[str, Any]) -> str:
    digits = 0 if f["median"] >= 100 else 2
    return f"{f['median']:,.{digits}f} ({f['min']:,.{digits}f}-{f['max']:,.{digits}f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--side", action="append", default=[], metavar="NAME=CHECKOUT",
                        help="a checkout to measure; the first is the baseline")  # fmt: skip
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-cpu", action="store_true")
    parser.add_argument("--skip-rates", action="store_true")
    parser.add_argument("--short", action="store_true",
                        help="rates: no per-job drains, a quarter of the jobs")  # fmt: skip
    parser.add_argument("--only", metavar="TEXT",
                        help="rates: only the figures whose label holds TEXT")  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--config", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.config), default=str))
        return
    checkouts = dict(side.split("=", 1) for side in args.side)
    if len(checkouts) < 2:
        parser.error("give at least two --side NAME=CHECKOUT")
    # SIGTERM / SIGINT unwind like an error: the trees and databases are removed.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: sys.exit(1))
    out_dir = common.RESULTS / "compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    with sides({name: Path(path) for name, path in checkouts.items()}) as made:
        record: dict[str, Any] = {
            "command": " ".join(["python -m bench.compare_commits", *sys.argv[1:]]),
            "commits": {s.name: s.commit for s in made.values()},
            "libraries": {s.name: s.library for s in made.values()},  # type: ignore[attr-defined]
            "load_before": os.getloadavg(),
        }
        print(record, flush=True)
        record["cpu_ir_per_job"] = {} if args.skip_cpu else cpu(made, out_dir)
        labels = SHORT if args.short else list(RATES)
        if args.only:
            labels = [label for label in labels if args.only in label]
        scale = 0.25 if args.short else 1.0
        errors: list[str] = record.setdefault("errors", [])
        record["rates"] = {} if args.skip_rates else rates(made, args.reps, labels, scale, errors)
        record["load_after"] = os.getloadavg()
    md = table(list(checkouts), record["cpu_ir_per_job"], record["rates"])
    (common.RESULTS / "compare.json").write_text(json.dumps(record, indent=1))
    (common.RESULTS / "compare.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
