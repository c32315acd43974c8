"""The bench's MariaDB server, shared by the systems on it (alkqueue_mariadb, raw_mariadb):
its address, a plain mysqlclient connection, and its statement counter."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

#: The server and user (no database): `make mariadb` creates the user.
SERVER = os.environ.get("BENCH_MARIADB_URL", "mysql://alkqueue:alkqueue@127.0.0.1:3306")


def connect(database: str | None = None) -> Any:
    """A mysqlclient connection (autocommit, READ COMMITTED) to `database` on the bench's
    MariaDB server (BENCH_MARIADB_URL)."""
    import MySQLdb

    url = urlsplit(SERVER)
    kwargs: dict[str, Any] = {"database": database} if database else {}
    conn = MySQLdb.connect(host=url.hostname or "127.0.0.1", port=url.port or 3306,
                           user=url.username or "", password=url.password or "",
                           charset="utf8mb4", autocommit=True, **kwargs)  # fmt: skip
    conn.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    return conn


def questions(database: str) -> int:
    """MariaDB's `Questions`: the statements clients have sent the server, every session's
    (a drain's two readings count a statement or two among its thousands)."""
    conn = connect(database)
    try:
        cur = conn.cursor()
        cur.execute("SHOW GLOBAL STATUS LIKE 'Questions'")
        return int(cur.fetchone()[1])
    finally:
        conn.close()
