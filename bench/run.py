"""`make bench` / `make bench-quick`: every system in turn, each in a fresh database and a
process of its own (bench/suite.py), then the tables, the JSON, the chart and the docs.

    python -m bench.run                 # full: N = 20,000, 3 repetitions, the 1M steps
    python -m bench.run --quick         # CI: N = 2,000 (200 for peers), 1 repetition, no 1M,
                                        # pickup latency over 50 jobs instead of 200
    python -m bench.run --systems raw,alkqueue
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from . import common, report
from .systems import SYSTEMS, load

#: The sizes of a run; latency_jobs: the jobs of a pickup-latency run, enqueued 20 ms apart
#: (a quick run's 50 take a second where 200 take four, for each system).
FULL = {"n": 20_000, "n_single": 5_000, "reps": 3, "latency_jobs": 200}
QUICK = {"n": 2_000, "n_single": 500, "reps": 1, "latency_jobs": 50}
#: A quick run's peers (the systems that are not django-alkqueue nor a raw loop): it checks
#: that their harness runs, and their drains of N = 2,000 took half of CI's bench stage (at
#: 500, django-tasks-db's two drains still took 27 s).
QUICK_PEERS = {"n": 200, "n_single": 200, "reps": 1, "latency_jobs": 50}


def params_of(name: str, quick: bool) -> dict[str, Any]:
    """The sizes a system runs at: a full run's for all; a quick run's, smaller for peers."""
    if not quick:
        return FULL
    ours = name.startswith(("raw", "alkqueue"))
    return QUICK if ours else QUICK_PEERS


def machine() -> dict[str, Any]:
    with common.admin_connection() as conn:
        pg = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in (
            "server_version", "fsync", "synchronous_commit", "wal_sync_method", "shared_buffers",
            "max_connections", "autovacuum", "checkpoint_timeout", "max_wal_size",
        )}  # fmt: skip
    packages = {}
    for name in ("Django", "psycopg", "django-tasks-db", "procrastinate", "django-vtasks",
                 "matplotlib", "psutil"):  # fmt: skip
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = "not installed"
    return {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgresql": pg,
        "packages": packages,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def load_snapshot() -> dict[str, Any]:
    """Load average and the busiest processes other than this run, over one second."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    procs = [p for p in psutil.process_iter(["pid", "name", "cmdline"]) if p.pid not in mine]
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.cpu_percent(None)
    time.sleep(1.0)
    busy = []
    for p in procs:
        try:
            pct = p.cpu_percent(None)
        except psutil.Error:
            continue
        if pct >= 5:
            cmd = " ".join(p.info["cmdline"] or [p.info["name"] or "?"])[:90]
            busy.append({"pid": p.pid, "cpu_pct": pct, "cmd": cmd})
    busy.sort(key=lambda b: -b["cpu_pct"])
    return {"at": _now(), "loadavg": os.getloadavg(), "busy": busy[:8]}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def run_system(name: str, params: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    system = load(name)
    out = common.RESULTS / "raw" / f"{'quick' if args.quick else 'full'}-{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    common.wait_for_server()
    system.create_database()
    cmd = [common.PYTHON, "-m", "bench.suite", name, "--out", str(out),
           "--n", str(params["n"]), "--n-single", str(params["n_single"]),
           "--reps", str(params["reps"]),
           "--latency-jobs", str(params["latency_jobs"])]  # fmt: skip
    if args.quick:
        cmd.append("--quick")
    started = time.monotonic()
    before = load_snapshot()
    proc = subprocess.run(cmd, cwd=common.ROOT, env=system.suite_env())
    after = load_snapshot()
    if not args.keep_dbs:
        system.drop_database()
    if proc.returncode != 0 or not out.exists():
        result = {"system": name, "title": system.title,
                  "errors": {"suite": f"exited {proc.returncode}"}}  # fmt: skip
    else:
        result = json.loads(out.read_text())
    result["seconds"] = time.monotonic() - started
    result["load"] = {"before": before, "after": after}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="N=2,000, 1 repetition, no 1M")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--keep-dbs", action="store_true", help="do not drop the databases")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="run only --systems and put them into the last run of this mode "
        "(results/full.json or quick.json), e.g. after a failed system",
    )
    args = parser.parse_args()
    params = QUICK if args.quick else FULL
    if args.quick:
        params = {**params, "peers": QUICK_PEERS}
    if args.quick:
        os.environ.setdefault("BENCH_DB_PREFIX", "bench_quick_")
        common.PREFIX = os.environ["BENCH_DB_PREFIX"]
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        sys.exit(f"unknown system(s) {unknown}; choose from {', '.join(SYSTEMS)}")
    mode = "quick" if args.quick else "full"
    results: dict[str, Any] = {
        "mode": mode,
        "params": params,
        "started": _now(),
        "command": "make bench-quick" if args.quick else "make bench",
        "machine": machine(),
        "systems": {},
    }
    merge: dict[str, Any] = {"systems": [], "started": _now()}
    if args.merge:  # the systems are listed as each one is measured: a run may stop early
        previous = json.loads((common.RESULTS / f"{mode}.json").read_text())
        previous.setdefault("merged", []).append(merge)
        results = previous
    started = time.monotonic() - results.get("seconds", 0.0)
    docs = not args.quick and not args.no_docs
    for name in names:
        print(f"== {name}", flush=True)
        results["systems"][name] = run_system(name, params_of(name, args.quick), args)
        merge["systems"].append(name)
        results["systems"] = {k: results["systems"][k] for k in SYSTEMS if k in results["systems"]}
        results["finished"] = _now()
        results["seconds"] = time.monotonic() - started
        results["complete"] = name == names[-1]
        written = report.write(results, docs=docs)  # after each system: a partial run leaves files
    for path in written:
        print(f"wrote {path.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
