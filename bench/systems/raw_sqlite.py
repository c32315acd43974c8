"""SQLite's own ceiling: the standard library's sqlite3 loops on a minimal queue table, no
Django (issue 53).

The file is in WAL mode with synchronous=NORMAL, the pragmas the testproject gives
django-alkqueue (docs/databases.md, "SQLite"); every write transaction is BEGIN IMMEDIATE, so
writers wait their turn for the one write lock instead of failing. Enqueue is one INSERT per
call (its own transaction), or one multi-row INSERT per 500 rows in one transaction in bulk.
The worker (raw_local_worker.py) claims k rows per transaction (UPDATE ... RETURNING of the
oldest k unclaimed), runs the no-op job for each, and deletes them in a second transaction.
k = 1 and k = 100 are the ceilings the targets read; k = 1,000 is informational. Idle workers
wake through this host's sockets (raw_wake.py), as django-alkqueue's do on SQLite.

The database is a file, PREFIX + name + ".sqlite3" in the system's temporary directory
(BENCH_SQLITE_DIR names another): no server, so no server CPU (the workers' CPU is all of it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from . import Config, System, raw_wake

TABLE = "raw_job"
SCHEMA = (
    f"DROP TABLE IF EXISTS {TABLE}",
    f"""CREATE TABLE {TABLE} (
        id INTEGER PRIMARY KEY,
        payload TEXT NOT NULL,
        run_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
        claimed_at REAL,
        claim_token TEXT
    )""",
    f"CREATE INDEX raw_job_pending ON {TABLE} (run_at, id) WHERE claimed_at IS NULL",
)
INSERT = f"INSERT INTO {TABLE} (payload) VALUES (?)"
#: Rows per statement of the bulk enqueue (SQLite allows 32,766 parameters per statement).
CHUNK = 500
#: Where the files go.
DIRECTORY = Path(os.environ.get("BENCH_SQLITE_DIR") or tempfile.gettempdir())


def path_of(database: str) -> Path:
    return DIRECTORY / f"{database}.sqlite3"


def connect(path: Path | str) -> sqlite3.Connection:
    """A connection in autocommit (transactions are explicit: BEGIN IMMEDIATE), WAL and
    synchronous=NORMAL, waiting up to 30 s for the write lock."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def remove(path: Path) -> None:
    """The database file and its WAL and shared-memory files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def insert_many(conn: sqlite3.Connection, payloads: list[dict[str, Any]]) -> None:
    """One multi-row INSERT per CHUNK rows, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for start in range(0, len(payloads), CHUNK):
            chunk = payloads[start : start + CHUNK]
            values = ", ".join(["(?)"] * len(chunk))
            conn.execute(f"INSERT INTO {TABLE} (payload) VALUES {values}",
                         [json.dumps(p) for p in chunk])  # fmt: skip
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class RawSQLite(System):
    name = "raw_sqlite"
    title = "raw sqlite3 (SQLite)"
    variants = True
    #: No server: no process has this name, so the server CPU reads 0.
    server_process = ""
    unfinished_sql = f"SELECT 1 FROM {TABLE} LIMIT 1"
    unfinished_count_sql = f"SELECT count(*) FROM {TABLE}"
    reset_sql = (f"DELETE FROM {TABLE}",)

    def __init__(self) -> None:
        super().__init__()
        self.path = path_of(self.database)
        self._conn: sqlite3.Connection | None = None

    def create_database(self) -> None:
        remove(self.path)
        connect(self.path).close()

    def drop_database(self) -> None:
        remove(self.path)
        raw_wake.remove(self.database)

    def install(self) -> None:
        with self.connection() as conn:
            for statement in SCHEMA:
                conn.execute(statement)

    def versions(self) -> dict[str, str]:
        return {"SQLite": f"{sqlite3.sqlite_version}, WAL, synchronous=NORMAL"}

    def env(self, **extra: str) -> dict[str, str]:
        from .. import common

        return common.python_env(None, **extra)

    def connection(self) -> Any:
        return contextlib.closing(connect(self.path))

    def poll_backend_pid(self, conn: Any) -> int:
        return 0

    def workers_ready(self, workers: Any) -> bool:
        return bool(workers.has_open(self.path))

    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self.path)
        return self._conn

    def reconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def reset(self) -> None:
        with self.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            for sql in self.reset_sql:
                conn.execute(sql)
            conn.execute("COMMIT")

    # -- enqueue ---------------------------------------------------------------------------

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        """One INSERT in its own transaction (autocommit: SQLite's implicit transaction takes
        the write lock at the INSERT, as BEGIN IMMEDIATE would)."""
        self.conn().execute(INSERT, [json.dumps(payload)])

    def enqueue_for_latency(self, payload: dict[str, Any], config: Config) -> None:
        self.enqueue_one(payload)
        raw_wake.send(self.database)

    def enqueue_bulk(self, payloads: list[dict[str, Any]]) -> None:
        insert_many(self.conn(), payloads)

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        insert_many(self.conn(), payloads)
        raw_wake.send(self.database)

    # -- workers ---------------------------------------------------------------------------

    def configs(self, quick: bool) -> list[Config]:
        claim_100 = Config("claim 100 per tx", {"batch": 100})
        if quick:  # CI keeps to the ceiling the targets read (a claim-1 drain takes long)
            return [claim_100]
        return [claim_100, Config("claim 1 per tx", {"batch": 1}),
                Config("claim 1000 per tx", {"batch": 1000}, informational=True)]  # fmt: skip

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        from .. import common

        cmd = [common.PYTHON, "-m", "bench.systems.raw_local_worker", "sqlite", str(self.path),
               "--batch", str(config.options["batch"]), "--wake", self.database]  # fmt: skip
        return [cmd] * processes
