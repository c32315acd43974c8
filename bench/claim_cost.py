"""The cost of one claim and its ack through the public API, in one process: the statements
each sends, and the CPU and wall time per claim+ack of one job (docs/databases.md, "Why the
ORM dialect drains slower").

    DATABASE_URL=... .venv/bin/python -m bench.claim_cost [--jobs 400] [--dialect auto|orm]

DATABASE_URL as for the testproject. The queue shop-noop is emptied, N jobs enqueued, then
claimed one at a time and acked by id (`claim(worker, 1)`, `ack_batch`). Prints one line.
"""

from __future__ import annotations

import argparse
import os
import time

QUEUE = "shop-noop"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--dialect", choices=["auto", "orm"], default="auto")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
    os.environ["ALKQUEUE_DIALECT"] = args.dialect
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_alkqueue import queue

    call_command("migrate", verbosity=0)
    noop = queue(QUEUE)
    noop.purge(["pending", "scheduled", "claimed", "dead"])
    noop.enqueue_many([{"n": n} for n in range(args.jobs + 1)])
    with CaptureQueriesContext(connection) as claim:
        handles = noop.claim("claim-cost", 1)
    with CaptureQueriesContext(connection) as ack:
        noop.ack_batch([h.job.id for h in handles])
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.jobs):
        noop.ack_batch([h.job.id for h in noop.claim("claim-cost", 1)])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    per_job = f"CPU {cpu / args.jobs * 1000:.2f} ms, wall {wall / args.jobs * 1000:.2f} ms"
    print(f"{connection.vendor} ({args.dialect} dialect): statements per claim "
          f"{len(claim.captured_queries)}, per ack {len(ack.captured_queries)}; "
          f"per claim+ack {per_job}")  # fmt: skip


if __name__ == "__main__":
    main()
