"""MariaDB's own ceiling: mysqlclient loops on a minimal queue table, no Django (issue 53).

Built as the raw psycopg system (raw.py) is: enqueue is one INSERT per call (autocommit), or
one multi-row INSERT per 1,000 rows in one transaction in bulk. The worker
(raw_local_worker.py) claims k rows per transaction (SELECT ... FOR UPDATE SKIP LOCKED, then
an UPDATE that stamps them: MariaDB has no UPDATE ... RETURNING), runs the no-op job for each,
and deletes them in a second transaction: the two commits per claim a durable queue needs.
k = 1 and k = 100 are the ceilings the targets read; k = 1,000 is informational. Sessions run
in READ COMMITTED, as Django opens them (docs/databases.md). Idle workers wake through this
host's sockets (raw_wake.py), as django-alkqueue's do on MariaDB.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from . import Config, System, raw_wake
from .mariadb_server import connect, questions

TABLE = "raw_job"
#: No partial index on MariaDB: the pending rows are the index's prefix claimed_at IS NULL.
SCHEMA = (
    f"DROP TABLE IF EXISTS {TABLE}",
    f"""CREATE TABLE {TABLE} (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        payload JSON NOT NULL,
        run_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        claimed_at DATETIME(6) NULL,
        claim_token CHAR(36) NULL,
        KEY raw_job_pending (claimed_at, run_at, id)
    ) ENGINE=InnoDB""",
)
INSERT = f"INSERT INTO {TABLE} (payload) VALUES (%s)"
#: Rows per statement of the bulk enqueue.
CHUNK = 1000


def insert_many(conn: Any, payloads: list[dict[str, Any]]) -> None:
    """One multi-row INSERT per CHUNK rows, in one transaction."""
    cur = conn.cursor()
    conn.begin()
    try:
        for start in range(0, len(payloads), CHUNK):
            chunk = payloads[start : start + CHUNK]
            values = ", ".join(["(%s)"] * len(chunk))
            cur.execute(f"INSERT INTO {TABLE} (payload) VALUES {values}",
                        [json.dumps(p) for p in chunk])  # fmt: skip
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


class RawMariaDB(System):
    name = "raw_mariadb"
    title = "raw mysqlclient (MariaDB)"
    variants = True
    server_process = "mariadbd"
    server_port = 3306
    unfinished_sql = f"SELECT 1 FROM {TABLE} LIMIT 1"
    unfinished_count_sql = f"SELECT count(*) FROM {TABLE}"
    reset_sql = (f"TRUNCATE {TABLE}",)

    def __init__(self) -> None:
        super().__init__()
        self._conn: Any = None
        self._cursor: Any = None

    # -- the server and the database -------------------------------------------------------

    def _admin(self, statement: str) -> None:
        conn = connect()
        try:
            conn.cursor().execute(statement)
        finally:
            conn.close()

    def create_database(self) -> None:
        self.drop_database()
        self._admin(f"CREATE DATABASE `{self.database}` CHARACTER SET utf8mb4")

    def drop_database(self) -> None:
        self._admin(f"DROP DATABASE IF EXISTS `{self.database}`")
        raw_wake.remove(self.database)

    def install(self) -> None:
        with self.connection() as conn:
            create_table(conn)

    def versions(self) -> dict[str, str]:
        from importlib import metadata

        with self.connection() as conn:
            cur = conn.cursor()
            cur.execute("SELECT VERSION(), @@innodb_flush_log_at_trx_commit")
            version, flush = cur.fetchone()
        return {"mysqlclient": metadata.version("mysqlclient"),
                "MariaDB": f"{version}, innodb_flush_log_at_trx_commit={flush}"}  # fmt: skip

    def env(self, **extra: str) -> dict[str, str]:
        from .. import common

        return common.python_env(None, **extra)

    def connection(self) -> Any:
        return contextlib.closing(connect(self.database))

    def server_statements(self) -> int | None:
        return questions(self.database)

    def poll_backend_pid(self, conn: Any) -> int:
        return 0  # one server process for every connection: the polls are in its figure

    def conn(self) -> Any:
        if self._conn is None:
            self._conn = connect(self.database)
            self._cursor = self._conn.cursor()
        return self._conn

    def cursor(self) -> Any:
        """The connection's one kept cursor (a new one per call would count as the INSERT's)."""
        self.conn()
        return self._cursor

    def reconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = self._cursor = None

    def reset(self) -> None:
        with self.connection() as conn:
            for sql in self.reset_sql:
                conn.cursor().execute(sql)

    def unfinished(self, conn: Any) -> bool:
        cur = conn.cursor()
        cur.execute(self.unfinished_sql)
        return cur.fetchone() is not None

    def unfinished_count(self, conn: Any) -> int:
        cur = conn.cursor()
        cur.execute(self.unfinished_count_sql)
        row = cur.fetchone()
        return int(row[0]) if row else 0

    # -- enqueue ---------------------------------------------------------------------------

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        self.cursor().execute(INSERT, [json.dumps(payload)])

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

        cmd = [common.PYTHON, "-m", "bench.systems.raw_local_worker", "mariadb", self.database,
               "--batch", str(config.options["batch"]), "--wake", self.database]  # fmt: skip
        return [cmd] * processes


def create_table(conn: Any) -> None:
    """The raw table, afresh."""
    cur = conn.cursor()
    for statement in SCHEMA:
        cur.execute(statement)
