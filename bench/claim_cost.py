"""The cost of one claim and its ack through the public API, in one process: the statements
each sends, and the CPU and wall time per claim+ack of one job (docs/databases.md, "Why the
ORM dialect drains slower").

    DATABASE_URL=... .venv/bin/python -m bench.claim_cost [--jobs 400] [--dialect auto|orm]

DATABASE_URL as for the testproject. The queue shop-noop is emptied, N jobs enqueued, then
claimed one at a time and acked by id (`claim(worker, 1)`, `ack_batch`). Prints one line.
"""

from __future__ import annotations

import time

from .noop_queue import arguments, seeded


def main() -> None:
    args = arguments(__doc__ or "", default_jobs=400)
    noop = seeded(args.jobs + 1, args.dialect)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

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
