"""Single enqueues from several processes at once, with and without the NOTIFY pacing.

PROCESSES processes each enqueue their share of n jobs one at a time (`Queue.enqueue`, each
its own transaction), all starting at one moment, while a LISTEN session is open on the
library's channel as a worker's listener would be. Once with ALKQUEUE["NOTIFY_WINDOW"] = 0
(every enqueue sends a NOTIFY) and once with the default; which goes first alternates. A
notifying commit holds a database-wide lock through its WAL flush, so notifying enqueuers
commit one at a time (django_alkqueue/sql/wake_pacing.py). The rounds write into one table,
which keeps the rows of the rounds before it, as a queue with a backlog does (into a table
emptied before each round, the four processes also contend for its first pages, and both
rounds ran slower). Figures: jobs/s over all the processes, from the first one's start to
the last one's end.

    python -m bench.notify_pacing COUNT START_AT   (one enqueuing process; its window comes
                                                   from BENCH_NOTIFY_WINDOW)
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from . import common

PROCESSES = 4
QUEUE = "notify-pacing"
#: Time given to the processes to start Django before they all begin.
START_DELAY = 5.0


def _enqueue(count: int, start_at: float) -> None:
    import django

    django.setup()
    from django_alkqueue import queue

    q = queue(QUEUE)
    q.enqueue({"warm": True})  # connection, prepared statement, the window's first NOTIFY
    time.sleep(max(start_at - time.time(), 0.0))
    started = time.time()
    for i in range(count):
        q.enqueue({"i": i})
    print(started, time.time())


def _round(database: str, window: float | None, n: int) -> float:
    extra = {"BENCH_DATABASE_URL": common.db_url(database)}
    if window is not None:
        extra["BENCH_NOTIFY_WINDOW"] = str(window)
    env = common.python_env("bench.settings.alkqueue", **extra)
    share = n // PROCESSES
    start_at = f"{time.time() + START_DELAY:.3f}"
    procs = [
        subprocess.Popen([common.PYTHON, "-m", "bench.notify_pacing", str(share), start_at],
                         cwd=common.ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(PROCESSES)
    ]  # fmt: skip
    spans = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"an enqueuing process exited with {proc.returncode}")
        started, ended = (float(x) for x in out.split())
        spans.append((started, ended))
    return share * PROCESSES / (max(e for _, e in spans) - min(s for s, _ in spans))


def measure(database: str, n: int, reps: int) -> dict[str, Any]:
    from django_alkqueue.conf import AlkQueueSettings
    from django_alkqueue.sql.postgresql import NOTIFY_CHANNEL

    default = AlkQueueSettings().NOTIFY_WINDOW
    windows = {"every enqueue notifies (NOTIFY_WINDOW 0)": 0.0,
               f"NOTIFY_WINDOW {default:g} (the default)": None}  # fmt: skip
    rates: dict[str, list[float]] = {label: [] for label in windows}
    listener = common.connect(database)
    listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
    try:
        for rep in range(reps):
            order = list(windows) if rep % 2 == 0 else list(reversed(windows))
            for label in order:
                rates[label].append(_round(database, windows[label], n))
                for _ in listener.notifies(timeout=0.01):
                    pass  # what the round sent, read off so that the queue stays short
        listener.execute("TRUNCATE alkqueue_message")
    finally:
        listener.close()
    return {"processes": PROCESSES, "n": n, "default_window": default,
            "jobs_per_s": {label: common.figure(v) for label, v in rates.items()}}  # fmt: skip


if __name__ == "__main__":
    _enqueue(int(sys.argv[1]), float(sys.argv[2]))
