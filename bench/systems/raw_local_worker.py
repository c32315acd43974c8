"""The raw worker loop on MariaDB (mysqlclient) and SQLite (sqlite3), no Django: claim k (one
commit), run the no-op jobs, delete them (one commit); when nothing is due, wait for a wake-up
on this host's socket (1 s at most) and try again.

    python -m bench.systems.raw_local_worker mariadb DATABASE --batch K --wake KEY
    python -m bench.systems.raw_local_worker sqlite PATH --batch K --wake KEY
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import uuid
from collections.abc import Callable
from typing import Any

from bench.jobs import noop
from bench.systems import raw_wake

TABLE = "raw_job"

#: MariaDB has no UPDATE ... RETURNING: the claim reads the rows FOR UPDATE SKIP LOCKED, then
#: stamps them, in one transaction.
MARIADB_PICK = (
    f"SELECT id, payload FROM {TABLE} WHERE claimed_at IS NULL "
    "ORDER BY run_at, id LIMIT %s FOR UPDATE SKIP LOCKED"
)
#: SQLite has one writer: BEGIN IMMEDIATE holds the write lock, so no row is skipped.
#: (SQLite 3.40 has no unixepoch('subsec'): seconds since the epoch from the Julian day.)
SQLITE_CLAIM = (
    f"UPDATE {TABLE} SET claimed_at = (julianday('now') - 2440587.5) * 86400.0, "
    "claim_token = ? WHERE id IN ("
    f"SELECT id FROM {TABLE} WHERE claimed_at IS NULL ORDER BY run_at, id LIMIT ?) "
    "RETURNING id, payload"
)

Rows = list[tuple[int, str]]


def mariadb_loop(database: str, batch: int) -> tuple[Callable[[], Rows], Callable[[Rows], None]]:
    from bench.systems.mariadb_server import connect

    conn = connect(database)
    cur = conn.cursor()

    def claim() -> Rows:
        conn.begin()
        cur.execute(MARIADB_PICK, [batch])
        rows: Rows = list(cur.fetchall())
        if rows:
            marks = ", ".join(["%s"] * len(rows))
            cur.execute(f"UPDATE {TABLE} SET claimed_at = NOW(6), claim_token = UUID() "
                        f"WHERE id IN ({marks})", [row[0] for row in rows])  # fmt: skip
        conn.commit()
        return rows

    def ack(rows: Rows) -> None:
        marks = ", ".join(["%s"] * len(rows))
        cur.execute(f"DELETE FROM {TABLE} WHERE id IN ({marks})", [row[0] for row in rows])

    return claim, ack


def sqlite_loop(path: str, batch: int) -> tuple[Callable[[], Rows], Callable[[Rows], None]]:
    from bench.systems.raw_sqlite import connect

    conn = connect(path)

    def claim() -> Rows:
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows: Rows = conn.execute(SQLITE_CLAIM, [str(uuid.uuid4()), batch]).fetchall()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return rows

    def ack(rows: Rows) -> None:
        marks = ", ".join(["?"] * len(rows))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(f"DELETE FROM {TABLE} WHERE id IN ({marks})", [row[0] for row in rows])
        conn.execute("COMMIT")

    return claim, ack


def run(engine: str, database: str, batch: int, wake: str) -> None:
    sock = raw_wake.bind(wake)
    try:
        claim, ack = (mariadb_loop if engine == "mariadb" else sqlite_loop)(database, batch)
        while True:
            rows: Any = claim()
            if not rows:
                raw_wake.wait(sock)
                continue
            for _, payload in rows:
                noop(json.loads(payload))
            ack(rows)
    finally:
        raw_wake.unbind(sock)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=("mariadb", "sqlite"))
    parser.add_argument("database", help="MariaDB: the database's name; SQLite: the file")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--wake", required=True, help="the wake-up sockets' key")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run(args.engine, args.database, args.batch, args.wake)


if __name__ == "__main__":
    main()
