"""The raw-SQL ceiling: psycopg loops on a minimal queue table, no framework at all.

Enqueue is one INSERT per call (autocommit), or COPY / one multi-row INSERT in bulk. The
worker (raw_worker.py) claims k rows per transaction with FOR UPDATE SKIP LOCKED, runs the
no-op job for each, and deletes them in a second transaction: the same two commits per
claim that a durable queue needs. k = 1 and k = 100 are the two ceilings; k = 1,000 shows how
far larger batches lift the machine's ceiling (informational: no target reads it).
"""

from __future__ import annotations

import json
from typing import Any

from .. import common
from . import Config, System

TABLE = "raw_job"
CHANNEL = "raw_job"
SCHEMA = f"""
CREATE TABLE {TABLE} (
    id bigserial PRIMARY KEY,
    payload json NOT NULL,
    run_at timestamptz NOT NULL DEFAULT now(),
    claimed_at timestamptz,
    claim_token uuid
);
CREATE INDEX raw_job_pending ON {TABLE} (run_at, id) WHERE claimed_at IS NULL;
"""
INSERT = f"INSERT INTO {TABLE} (payload) VALUES (%s)"
INSERT_NOTIFY = (
    f"WITH i AS (INSERT INTO {TABLE} (payload) VALUES (%s) RETURNING id) "
    f"SELECT pg_notify('{CHANNEL}', '') FROM i"
)


def create_table(conn: Any) -> None:
    """The raw table, afresh (also in django-alkqueue's database, for the side-by-side
    enqueue figures)."""
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(SCHEMA)


def copy_rows(conn: Any, payloads: list[dict[str, Any]]) -> None:
    """The raw bulk enqueue: COPY of the payloads, then one NOTIFY, in one transaction."""
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(f"COPY {TABLE} (payload) FROM STDIN") as copy:
            for payload in payloads:
                copy.write_row((json.dumps(payload),))
        cur.execute(f"SELECT pg_notify('{CHANNEL}', '')")


class Raw(System):
    name = "raw"
    title = "raw psycopg"
    variants = True
    unfinished_sql = f"SELECT 1 FROM {TABLE} LIMIT 1"
    unfinished_count_sql = f"SELECT count(*) FROM {TABLE}"
    reset_sql = (f"TRUNCATE {TABLE}",)
    vacuum_tables = (TABLE,)

    def __init__(self) -> None:
        super().__init__()
        self._conn: Any = None
        self._cursor: Any = None

    def conn(self) -> Any:
        if self._conn is None:
            self._conn = common.connect(self.database)
            self._cursor = self._conn.cursor()
        return self._conn

    def cursor(self) -> Any:
        """The connection's one kept cursor: psycopg's `Connection.execute` sets up a new
        cursor per call, which would be read as the statement's cost."""
        self.conn()
        return self._cursor

    def reconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = self._cursor = None

    def install(self) -> None:
        with self.connection() as conn:
            create_table(conn)

    def versions(self) -> dict[str, str]:
        import psycopg

        return {"psycopg": psycopg.__version__}

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        self.cursor().execute(INSERT, [json.dumps(payload)], prepare=True)

    def enqueue_for_latency(self, payload: dict[str, Any], config: Config) -> None:
        self.conn().execute(INSERT_NOTIFY, [json.dumps(payload)])

    def enqueue_bulk(self, payloads: list[dict[str, Any]]) -> None:
        self.copy(payloads)

    def copy(self, payloads: list[dict[str, Any]]) -> None:
        copy_rows(self.conn(), payloads)

    def insert_many(self, payloads: list[dict[str, Any]]) -> None:
        """One multi-row INSERT per 1,000 rows, in one transaction."""
        conn = self.conn()
        with conn.transaction(), conn.cursor() as cur:
            for start in range(0, len(payloads), 1000):
                chunk = payloads[start : start + 1000]
                values = ", ".join(["(%s)"] * len(chunk))
                cur.execute(f"INSERT INTO {TABLE} (payload) VALUES {values}",
                            [json.dumps(p) for p in chunk])  # fmt: skip
            cur.execute(f"SELECT pg_notify('{CHANNEL}', '')")

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        self.copy(payloads)

    def configs(self, quick: bool) -> list[Config]:
        ceilings = [
            Config("claim 100 per tx", {"batch": 100}),
            Config("claim 1 per tx", {"batch": 1}),
        ]
        if quick:  # CI keeps to the two ceilings the targets read
            return ceilings
        return [*ceilings, Config("claim 1000 per tx", {"batch": 1000}, informational=True)]

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        cmd = [common.PYTHON, "-m", "bench.systems.raw_worker", "--dsn",
               common.db_url(self.database), "--batch", str(config.options["batch"])]  # fmt: skip
        return [cmd] * processes
