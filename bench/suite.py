"""One system's measurements, in a process of its own (Django set up with that system's
settings): `python -m bench.suite SYSTEM --out FILE [--quick]`. Called by bench/run.py.

A step that fails is recorded with its error, and the suite goes on with the next one.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import common, measure
from .systems import Config, System, load

#: Times a step is run again after the server went away under it.
RETRIES = 8
#: Pairs of bulk enqueues (raw COPY, enqueue_many) in the side-by-side step of a full run.
BULK_PAIRS = 7
#: Single enqueues per turn in the side-by-side step.
SINGLE_CHUNK = 50
#: django-alkqueue on MariaDB and SQLite: the raw system its enqueues take turns with.
ENGINE_RAW = {"alkqueue_mariadb": "raw_mariadb", "alkqueue_sqlite": "raw_sqlite"}


class Suite:
    def __init__(self, system: System, params: dict[str, Any]) -> None:
        self.system = system
        self.p = params
        self.out: dict[str, Any] = {"system": system.name, "title": system.title, "errors": {}}
        self.settle = measure.settle_seconds(params["quick"])

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run one measurement; run again (RETRIES times at most) when the server went away."""
        started = time.monotonic()
        print(f"[{self.system.name}] {name} ...", flush=True)
        for attempt in range(RETRIES + 1):
            try:
                value = fn()
                break
            except Exception as exc:
                if attempt < RETRIES and common.is_connection_error(exc):
                    self.out.setdefault("retried", []).append(f"{name}: {exc!r}"[:300])
                    print(f"[{self.system.name}] {name}: server gone ({exc!r}); retrying",
                          flush=True)  # fmt: skip
                    self.reconnect()
                    continue
                self.out["errors"][name] = f"{exc!r}\n{traceback.format_exc(limit=4)}"
                print(f"[{self.system.name}] {name} FAILED: {exc!r}", flush=True)
                return None
        print(f"[{self.system.name}] {name} done in {time.monotonic() - started:.1f}s", flush=True)
        return value

    def reconnect(self) -> None:
        common.wait_for_server()
        time.sleep(2.0)
        self.system.reconnect()

    def run(self) -> dict[str, Any]:
        s, p = self.system, self.p
        self.out["versions"] = s.versions()
        self.out["load_before"] = os.getloadavg()
        self.out["enqueue_single"] = self.step(
            "enqueue one at a time",
            lambda: measure.enqueue(s, "enqueue_one", p["n_single"], p["reps"]),
        )
        self.out["enqueue_bulk"] = self.step(
            "enqueue in bulk", lambda: measure.enqueue(s, "enqueue_bulk", p["n"], p["reps"])
        )
        if s.name == "raw":
            self.out["enqueue_bulk_insert"] = self.step(
                "enqueue multi-row INSERT",
                lambda: measure.enqueue(s, "insert_many", p["n"], p["reps"]),
            )
        configs = s.configs(p["quick"])
        chosen = configs if s.variants else [self.best(configs)]
        self.out["variants"] = [self.variant(c) for c in chosen]
        self.extras()
        self.out["load_after"] = os.getloadavg()
        return self.out

    def best(self, configs: list[Config]) -> Config:
        """The configuration with the fastest 1-process drain (a single run each)."""
        if len(configs) == 1:
            return configs[0]
        n = min(self.p["n"], self.system.scan_n)
        scan = []
        for c in configs:
            r = self.step(
                f"scan {c.label}",
                lambda c=c: measure.drain(self.system, n, 1, c, "scan", self.settle),
            )
            if r is not None:
                scan.append({"config": c.label, "informational": c.informational, **r})
        self.out["scan"] = scan
        eligible = [r for r in scan if not r["informational"]]
        if not eligible:
            return configs[0]
        top = max(eligible, key=lambda r: r["jobs_per_s"])
        return next(c for c in configs if c.label == top["config"])

    def variant(self, config: Config) -> dict[str, Any]:
        s, p = self.system, self.p
        out: dict[str, Any] = {"config": config.label, "informational": config.informational}
        # One step per repetition: a server restart costs that repetition only.
        for procs in (1, 2):
            runs = [
                self.step(
                    f"drain {procs} process(es), {config.label}, repetition {r + 1}",
                    lambda procs=procs, r=r: measure.drain(
                        s, p["n"], procs, config, f"drain-p{procs}-r{r}", self.settle
                    ),
                )
                for r in range(p["reps"])
            ]
            done = [run for run in runs if run is not None]
            out[f"drain_{procs}"] = (
                measure.drain_summary(done, config, p["n"], procs) if done else None
            )
        runs = [
            self.step(
                f"pickup latency, {config.label}, repetition {r + 1}",
                lambda: measure.latency(s, config, p["latency_jobs"], 0.02, settle=self.settle),
            )
            for r in range(p["reps"])
        ]
        done = [run for run in runs if run is not None]
        out["latency"] = measure.latency_summary(done, config, p["latency_jobs"]) if done else None
        out["options"] = config.options
        return out

    def extras(self) -> None:
        """The measurements only some systems get: the enqueues side by side with the raw
        calls, claim+ack against the size of the table, the admin."""
        from . import scale

        if self.system.name == "alkqueue":
            self.out["side_by_side"] = self.side_by_side()
            self.scale(
                lambda: scale.AlkQueueLoops(self.admin),
                lambda _: scale.AlkQueueLoops(using=scale.BASELINE_ALIAS),
            )
        if self.system.name == "raw":
            self.scale(lambda: scale.RawLoops(self.system.database), scale.RawLoops)
        if self.system.name in ENGINE_RAW:
            self.out["side_by_side"] = self.side_by_side(ENGINE_RAW[self.system.name])

    def side_by_side(self, raw_name: str = "raw") -> dict[str, Any]:
        """django-alkqueue's enqueues taking turns with the raw calls, the raw table created
        in the same database (on MariaDB and SQLite too: their raw systems, raw_name)."""
        raw = load(raw_name)
        raw.database = self.system.database
        if hasattr(self.system, "path"):  # SQLite: the same file
            raw.path = self.system.path  # type: ignore[attr-defined]
        raw.install()
        sides = {"raw": raw, "alkqueue": self.system}
        bulk_call = "COPY" if raw_name == "raw" else "multi-row INSERT"
        p = self.p
        return {
            "single": self.step(
                "single enqueue side by side with the raw INSERT",
                lambda: measure.side_by_side(
                    sides, "enqueue_one", p["n_single"], p["reps"], SINGLE_CHUNK
                ),
            ),
            "bulk": self.step(
                f"bulk enqueue side by side with the raw {bulk_call}",
                lambda: measure.side_by_side(
                    sides, "enqueue_bulk", p["n"], 1 if p["quick"] else BULK_PAIRS, p["n"]
                ),
            ),
        }

    def scale(self, make_loops: Callable[[], Any], make_baseline: Callable[[str], Any]) -> None:
        """The claim+ack scenarios, beside a baseline in a database of its own (created here,
        dropped at the end); `make_baseline` gets that database's name."""
        from . import scale

        baseline = self.system.database + scale.BASELINE_SUFFIX
        common.create_database(baseline)
        try:
            make_baseline(baseline).install()
            merged: dict[str, Any] = {}
            scenarios = scale.scenarios(
                make_loops, lambda: make_baseline(baseline), self.p["quick"]
            )
            for name, fn in scenarios:
                merged.update(self.step(f"claim+ack, {name}", fn) or {})
            self.out["scale"] = merged
        finally:
            common.drop_database(baseline)  # WITH (FORCE): the loops' connections go with it

    def admin(self, which: str) -> dict[str, Any]:
        from . import admin_timing

        return admin_timing.measure(which)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system")
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--n-single", type=int, required=True)
    parser.add_argument("--reps", type=int, required=True)
    parser.add_argument("--latency-jobs", type=int, default=200)
    args = parser.parse_args()
    # SIGTERM / SIGINT unwind like an error, so the workers started so far are stopped too.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: sys.exit(1))
    system = load(args.system)
    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        import django

        django.setup()
    system.install()
    params = {"quick": args.quick, "n": args.n, "n_single": args.n_single, "reps": args.reps,
              "latency_jobs": args.latency_jobs}  # fmt: skip
    result = Suite(system, params).run()
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
