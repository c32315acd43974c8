"""What every part of the harness shares: the server, fresh databases, figures, processes."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
import psycopg

from .django_setup import setup_django as setup_django  # the scripts call common.setup_django

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
LOGS = RESULTS / "logs"

#: The one PostgreSQL server every system runs against (trust auth on this machine).
SERVER = os.environ.get("BENCH_PG_URL", "postgres://root@127.0.0.1:5432")
#: Databases are named PREFIX + system; a quick run uses its own names beside a full one.
PREFIX = os.environ.get("BENCH_DB_PREFIX", "bench_")


def db_url(name: str) -> str:
    return f"{SERVER}/{name}"


def admin_connection() -> psycopg.Connection[Any]:
    return psycopg.connect(db_url("postgres"), autocommit=True)


def wait_for_server(timeout: float = 180.0) -> None:
    """Until the server accepts connections again (other test suites on this machine restart
    the cluster)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with admin_connection() as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


CONNECTION_ERRORS = (
    "terminating connection", "server closed the connection", "connection refused",
    "connection failed", "the connection is closed", "admin shutdown", "adminshutdown",
    "consuming input failed", "the database system is", "connectorexception",
)  # fmt: skip


def is_connection_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return any(marker in text for marker in CONNECTION_ERRORS)


def create_database(name: str) -> None:
    """A fresh, empty database: dropped first if a previous run left it."""
    with admin_connection() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def own_database(topic: str, quick: bool) -> str:
    """A fresh database for one module's own run (BENCH_DB_PREFIX, else bench_ or
    bench_quick_, plus `topic`, so a quick run's stands beside a full one's); its URL."""
    prefix = os.environ.get("BENCH_DB_PREFIX", "bench_quick_" if quick else "bench_")
    create_database(prefix + topic)
    return db_url(prefix + topic)


def drop_database(name: str) -> None:
    with admin_connection() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def connect(name: str) -> psycopg.Connection[Any]:
    return psycopg.connect(db_url(name), autocommit=True)


# -- figures ----------------------------------------------------------------------------------


def figure(values: Sequence[float]) -> dict[str, Any]:
    """The median of the repetitions with their min and max (and the values themselves)."""
    vals = [float(v) for v in values]
    return {
        "median": statistics.median(vals),
        "min": min(vals),
        "max": max(vals),
        "n": len(vals),
        "values": vals,
    }


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, round(p / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def wait_until(
    predicate: Callable[[], bool], timeout: float, interval: Callable[[float], float] | float
) -> float:
    """Poll `predicate` until true; returns the monotonic time it was first seen true.
    `interval` may depend on the time elapsed, so long waits poll less often."""
    start = time.perf_counter()
    while True:
        now = time.perf_counter()
        if predicate():
            return time.perf_counter()
        elapsed = now - start
        if elapsed > timeout:
            raise TimeoutError(f"condition not met within {timeout:.0f}s")
        time.sleep(interval(elapsed) if callable(interval) else interval)


def adaptive_interval(elapsed: float) -> float:
    """Poll every 5 ms at first, then at most 0.5% of the time elapsed (so < 0.5% error)."""
    return min(max(0.005, elapsed / 200), 0.1)


# -- processes --------------------------------------------------------------------------------


class Workers:
    """Worker processes started for one measurement; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, commands: list[list[str]], env: dict[str, str], log_name: str) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log_path = LOGS / f"{log_name}.log"
        self._log = self.log_path.open("w")
        self.procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
                      for cmd in commands]  # fmt: skip

    def tree(self) -> list[psutil.Process]:
        found: list[psutil.Process] = []
        for proc in self.procs:
            try:
                parent = psutil.Process(proc.pid)
                found += [parent, *parent.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
        return found

    def leaves(self) -> list[psutil.Process]:
        """The processes that do the work (a supervisor's children, else the process)."""
        leaves = []
        for proc in self.tree():
            try:
                if not proc.children():
                    leaves.append(proc)
            except psutil.NoSuchProcess:
                continue
        return leaves

    def cpu_seconds(self) -> float:
        total = 0.0
        for proc in self.tree():
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                continue
        return total

    def peak_rss_mb(self) -> float:
        """The largest VmHWM (peak resident set) among the worker processes, in MB."""
        return max((vm_hwm_mb(p.pid) for p in self.leaves()), default=0.0)

    def connected(self, port: int = 5432) -> bool:
        """Every worker process holds a connection to the server (its start-up is over)."""
        leaves = self.leaves()
        if not leaves:
            return False
        for proc in leaves:
            try:
                conns = proc.net_connections(kind="tcp")
            except psutil.NoSuchProcess:
                return False
            if not any(c.raddr and c.raddr.port == port for c in conns):
                return False
        return True

    def has_open(self, path: Path) -> bool:
        """Every worker process has the file `path` open (SQLite: its start-up is over)."""
        leaves = self.leaves()
        if not leaves:
            return False
        for proc in leaves:
            try:
                files = proc.open_files()
            except psutil.NoSuchProcess:
                return False
            if not any(f.path == str(path) for f in files):
                return False
        return True

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def stop(self, timeout: float = 20.0) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._log.close()

    def tail(self, lines: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def server_cpu(process: str = "postgres", parent: int | None = None) -> dict[int, float]:
    """CPU seconds of every database server process named `process`, by pid; with `parent`,
    only that process's children (one cluster's, when the machine runs two)."""
    found = {}
    for proc in psutil.process_iter(["name", "ppid"]):
        if proc.info["name"] != process or parent not in (None, proc.info["ppid"]):
            continue
        try:
            times = proc.cpu_times()
            found[proc.pid] = times.user + times.system
        except psutil.Error:
            continue
    return found


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of all the machine's cores since boot. Waiting on I/O counts
    as idle; guest time is already inside user time, so it is not added again."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    total = sum(getattr(t, f) for f in t._fields if f not in ("guest", "guest_nice"))
    return total - idle, total


def machine_busy_since(before: tuple[float, float]) -> float:
    """The share of all cores' time that was busy since `before` (0 to 1)."""
    busy, total = machine_cpu()
    return (busy - before[0]) / max(total - before[1], 1e-9)


def server_cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the server spent between two `server_cpu()` readings (processes alive at
    both ends; those that started meanwhile count in full)."""
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


def vm_hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def python_env(settings: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a subprocess: this venv's interpreter, the repo on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_LATENCY")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    if settings:
        env["DJANGO_SETTINGS_MODULE"] = settings
    env.update(extra)
    return env


PYTHON = sys.executable


# -- alk_worker runs of the feature benches ---------------------------------------------------


def start_workers(queue_name: str, processes: int, *options: str) -> list[subprocess.Popen[bytes]]:
    """`processes` `alk_worker` processes serving `queue_name` with `options`, each in its own
    session, with this process's settings."""
    command = [sys.executable, "-m", "django", "alk_worker", "--queue", queue_name, "-v", "0",
               *options]  # fmt: skip
    return [
        subprocess.Popen(command, env=os.environ.copy(), cwd=ROOT, start_new_session=True)
        for _ in range(processes)
    ]


def wait_listening(workers: list[subprocess.Popen[bytes]], timeout: float = 60.0) -> None:
    """Until each of `workers` has its LISTEN session open on this process's database (Django's
    connection), so that the enqueue that follows wakes them at once: the event a worker's
    start-up ends with, instead of a fixed wait long enough for a loaded machine."""
    from django.db import connection

    deadline = time.monotonic() + timeout
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN %'"
            )
            listening = cursor.fetchone()[0]
        if listening >= len(workers):
            return
        if any(worker.poll() is not None for worker in workers):
            raise RuntimeError("a worker exited at start-up")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{listening} of {len(workers)} listening after {timeout:g} s")
        time.sleep(0.05)


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        worker.wait(timeout=60)


def wait_queue_empty(queue_name: str, timeout: float) -> float:
    """Seconds until the queue holds no job."""
    from django_alkqueue.models import QueueMessage

    started = time.perf_counter()
    while QueueMessage.objects.filter(queue=queue_name).exists():
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"{queue_name} not drained in {timeout:g} s")
        time.sleep(0.01)
    return time.perf_counter() - started
