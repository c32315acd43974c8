"""django-alkqueue's bulk enqueue and the raw ceiling's, taking turns in one time window.

Each repetition writes N payloads twice into the same database: once with the raw
ceiling's COPY into its one-column raw_job table (bench/systems/raw.py), once with
`Queue.enqueue_many`; which goes first alternates. The suite's own bulk figures are taken
minutes apart, one system after the other, while the machine's disk and load drift; this
pair gives the bulk target its side-by-side ratio (bench/targets.py).
"""

from __future__ import annotations

import time
from typing import Any

from . import common
from .measure import payloads
from .systems import raw

QUEUE = "bulk-side-by-side"


def measure(database: str, n: int, reps: int) -> dict[str, Any]:
    from django_alkqueue import queue

    conn = common.connect(database)
    raw.create_table(conn)
    q = queue(QUEUE)
    calls = {"raw": lambda batch: raw.copy_rows(conn, batch), "alkqueue": q.enqueue_many}
    rates: dict[str, list[float]] = {name: [] for name in calls}
    ratios = []
    try:
        for rep in range(reps):
            order = list(calls) if rep % 2 == 0 else list(reversed(calls))
            for name in order:
                conn.execute(f"TRUNCATE alkqueue_message, {raw.TABLE}")
                batch = payloads(n)
                started = time.perf_counter()
                calls[name](batch)
                rates[name].append(n / (time.perf_counter() - started))
            ratios.append(rates["alkqueue"][-1] / rates["raw"][-1])
        conn.execute("TRUNCATE alkqueue_message")
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {raw.TABLE}")
        conn.close()
    return {
        "n": n,
        "jobs_per_s": {name: common.figure(v) for name, v in rates.items()},
        "ratio": common.figure(ratios),  # per repetition: the pair ran back to back
    }
