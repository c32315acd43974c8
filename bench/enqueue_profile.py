"""A py-spy profile of single enqueues: where the time of one `Queue.enqueue` goes, the waits
included (`py-spy --idle`), for the single-enqueue target's paragraph in docs/benchmarks.md.

One process enqueues n jobs one at a time, each its own transaction, as the single-enqueue
figure does; py-spy samples it from the first of them to the last. A sample whose running
frame is psycopg's `Connection.wait` is the call waiting on its socket: the server's work,
the commit's WAL flush and the round trip. The rest is Python, by package. The sampling
slows the process down (py-spy reads its memory on every sample), so the profile gives
shares, not rates; the rate under the profiler is recorded beside them.

    python -m bench.enqueue_profile COUNT   (the enqueuing process: it says "ready", waits
                                            for a line on stdin, enqueues, prints its rate)
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from . import common
from .profiling import PySpy, summarise

QUEUE = "enqueue-profile"


def _enqueue(count: int) -> None:
    import django

    django.setup()
    from django_alkqueue import queue

    q = queue(QUEUE)
    for i in range(100):  # the connection, the prepared statements, warm code
        q.enqueue({"warm": i})
    _wait_for_go()
    started = time.perf_counter()
    for i in range(count):
        q.enqueue({"i": i})
    print(count / (time.perf_counter() - started), flush=True)


def _wait_for_go() -> None:
    """Idle while py-spy attaches; its samples here are left out (see _before_go)."""
    print("ready", flush=True)
    sys.stdin.readline()


def _before_go(frames: list[str]) -> bool:
    return any(frame.startswith("_wait_for_go ") for frame in frames)


def measure(database: str, n: int) -> dict[str, Any]:
    env = common.python_env("bench.settings.alkqueue", BENCH_DATABASE_URL=common.db_url(database))
    proc = subprocess.Popen([common.PYTHON, "-m", "bench.enqueue_profile", str(n)],
                            cwd=common.ROOT, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    spy = PySpy(common.RESULTS / "profile-alkqueue-enqueue", idle=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the enqueuing process did not start")
        spy.attach([proc.pid])
        proc.stdin.write("go\n")
        proc.stdin.flush()
        rate = float(proc.stdout.readline())
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        spy.stop()
    stacks = [(frames, count) for frames, count in spy.stacks() if not _before_go(frames)]
    summary = summarise(stacks)
    waiting = sum(count for frames, count in stacks if frames and _waits(frames[-1]))
    spy.keep(stacks, common.RESULTS / "profile-alkqueue-enqueue.txt")
    with common.connect(database) as conn:
        conn.execute("TRUNCATE alkqueue_message")
    return {"n": n, "jobs_per_s_under_profiler": rate,
            "waiting_pct": 100 * waiting / summary["samples"] if summary["samples"] else None,
            **summary}  # fmt: skip


def _waits(frame: str) -> bool:
    """Whether a running frame is psycopg's wait for the server (its C wait below it)."""
    name, _, where = frame.partition(" (")
    return name == "Connection.wait" and "psycopg/connection.py" in where


if __name__ == "__main__":
    _enqueue(int(sys.argv[1]))
