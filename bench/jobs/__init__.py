"""The one no-op job every system runs, taking one small JSON argument.

A drain payload is {"i": n}: the job does nothing with it. A pickup-latency payload also
carries "t", the enqueuer's time.time() taken just before the enqueue call; the job then
appends "t start" to the file named by BENCH_LATENCY_FILE (set only for latency runs), so
the latency is the job's start minus the enqueue, measured the same way for every system.
"""

from __future__ import annotations

import os
import time
from typing import Any

LATENCY_FILE = os.environ.get("BENCH_LATENCY_FILE")


def noop(payload: Any) -> None:
    if LATENCY_FILE and isinstance(payload, dict) and "t" in payload:
        started = time.time()
        with open(LATENCY_FILE, "a") as out:
            out.write(f"{payload['t']} {started}\n")
