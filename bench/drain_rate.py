"""The drain rate of docs/databases.md: N jobs enqueued, then drained by one worker.

    DATABASE_URL=... .venv/bin/python -m bench.drain_rate [--jobs 5000] [--dialect auto|orm]

DATABASE_URL as for the testproject (empty: SQLite, in ALKQUEUE_SQLITE_NAME or
testproject/db.sqlite3). The database is migrated, the no-op queue shop-noop emptied, N jobs
enqueued with enqueue_many, and `manage.py alk_worker --queue shop-noop --burst
--concurrency 1` run to the end; the rate is N over the command's wall time, start-up
included. Prints one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .noop_queue import QUEUE, arguments, seeded

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    args = arguments(__doc__ or "", default_jobs=5000)
    noop = seeded(args.jobs, args.dialect)
    from django.db import connection

    command = [sys.executable, str(ROOT / "manage.py"), "alk_worker", "--queue", QUEUE,
               "--burst", "--concurrency", "1"]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, env=os.environ, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - started
    left = noop.stats()
    assert left.pending == left.claimed == left.dead == 0, left
    print(f"{connection.vendor} (ALKQUEUE_DIALECT={args.dialect}): {args.jobs} jobs drained "
          f"by one worker in {seconds:.1f} s, {args.jobs / seconds:,.0f} jobs/s")  # fmt: skip


if __name__ == "__main__":
    main()
