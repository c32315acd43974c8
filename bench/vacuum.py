"""The harness's stand-in for autovacuum during drains.

The server on this machine runs with `autovacuum = off`. Without it, and while any session
of the cluster keeps a transaction open (other test suites do, for minutes), a backend's
snapshot xmin stays pinned, PostgreSQL does not recompute its visibility horizon, index
scans stop marking the entries of dead rows as dead, and every claim walks past all the
rows claimed so far: a claim-1-per-transaction drain of 20,000 jobs becomes quadratic.
That measures the neighbours, not the system, so during a drain a thread vacuums the
system's queue tables once they hold more than THRESHOLD dead tuples (checked every
INTERVAL seconds): what autovacuum with `autovacuum_vacuum_threshold = 5000`, scale factor
0 and a 1 s naptime would do. Every system gets the same treatment; the count is recorded.
"""

from __future__ import annotations

import threading
from typing import Any

from . import common

THRESHOLD = 5_000
INTERVAL = 1.0


class Vacuumer:
    def __init__(self, database: str, tables: tuple[str, ...]) -> None:
        self.database = database
        self.tables = tables
        self.vacuums = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-vacuum", daemon=True)

    def __enter__(self) -> Vacuumer:
        if self.tables:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)

    def _run(self) -> None:
        try:
            conn = common.connect(self.database)
        except Exception:
            return
        with conn:
            while not self._stop.wait(INTERVAL):
                try:
                    self._tick(conn)
                except Exception:
                    return

    def _tick(self, conn: Any) -> None:
        rows = conn.execute(
            "SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname = ANY(%s)",
            [list(self.tables)],
        ).fetchall()
        for table, dead in rows:
            if dead > THRESHOLD and not self._stop.is_set():
                conn.execute(f"VACUUM {table}")
                self.vacuums += 1
