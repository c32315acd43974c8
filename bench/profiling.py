"""A py-spy profile of a worker process during a drain, and its summary: where the samples of
the active threads go, by function (self and inclusive) and by package."""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from . import common

RATE = 250


class PySpy:
    """Attaches py-spy to the worker's leaf processes when the drain starts (the thread
    holding the GIL: where the CPU goes), or to any process with `idle` (every thread, in a
    wait or not: where the time goes)."""

    def __init__(self, out: Path, *, idle: bool = False) -> None:
        self.out = out
        self.idle = idle
        self.procs: list[subprocess.Popen[bytes]] = []
        self.files: list[Path] = []

    def start(self, workers: common.Workers) -> None:
        self.attach([proc.pid for proc in workers.leaves()])

    def attach(self, pids: list[int]) -> None:
        exe = shutil.which("py-spy", path=str(Path(common.PYTHON).parent)) or "py-spy"
        which = "--idle" if self.idle else "--gil"
        for i, pid in enumerate(pids):
            path = self.out.with_suffix(f".{i}.raw")
            self.files.append(path)
            self.procs.append(subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw",
                 "--output", str(path), "--nonblocking", which],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))  # fmt: skip
        time.sleep(0.5)  # py-spy attaches before the work starts

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

    def keep(self, stacks: list[tuple[list[str], int]], out: Path) -> None:
        """Write `stacks` collapsed (flamegraph.pl / speedscope read them) to `out`, beside
        the results, and remove py-spy's raw files."""
        out.write_text("".join(f"{';'.join(frames)} {count}\n" for frames, count in stacks))
        for path in self.files:
            path.unlink(missing_ok=True)

    def stacks(self) -> list[tuple[list[str], int]]:
        found = []
        for path in self.files:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if stack and count.isdigit():
                    found.append((stack.split(";"), int(count)))
        return found


PACKAGES = ("django_alkqueue", "psycopg", "django", "bench", "threading", "logging", "json",
            "uuid", "queue", "dataclasses")  # fmt: skip


def package(frame: str) -> str:
    """`function (path/to/module.py:line)` -> a coarse owner of the code."""
    path = "/" + frame.rpartition("(")[2]
    for owner in PACKAGES:
        if f"/{owner}/" in path or f"/{owner}.py" in path:
            return owner
    return "other (stdlib, interpreter)"


def _short(frame: str) -> str:
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("site-packages/", "/work/main/", "lib/python3.13/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{name} ({where.rpartition(':')[0]})"


def summarise(stacks: list[tuple[list[str], int]], top: int = 25) -> dict[str, Any]:
    total = sum(c for _, c in stacks)
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    for frames, count in stacks:
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        own[_short(frames[-1])] += count
        packages[package(frames[-1])] += count
        for name in {_short(f) for f in frames}:
            incl[name] += count

    def share(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [{"name": k, "samples": v, "pct": 100 * v / total} for k, v in
                counter.most_common(top)]  # fmt: skip

    return {"samples": total, "rate_hz": RATE, "self": share(own), "inclusive": share(incl),
            "by_package": share(packages)}  # fmt: skip
