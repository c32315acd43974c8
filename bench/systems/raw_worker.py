"""The raw psycopg worker loop: claim k (one commit), run the no-op jobs, delete them (one
commit); when nothing is due, wait for a NOTIFY (1 s at most) and try again."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

import psycopg

from bench.jobs import noop
from bench.systems.raw import CHANNEL, TABLE

CLAIM = f"""
UPDATE {TABLE} SET claimed_at = now(), claim_token = gen_random_uuid()
WHERE id IN (
    SELECT id FROM {TABLE} WHERE claimed_at IS NULL
    ORDER BY run_at, id LIMIT %s FOR UPDATE SKIP LOCKED
)
RETURNING id, payload
"""
ACK = f"DELETE FROM {TABLE} WHERE id = ANY(%s)"


def run(dsn: str, batch: int) -> None:
    conn = psycopg.connect(dsn, autocommit=True)
    listener = psycopg.connect(dsn, autocommit=True)
    listener.execute(f"LISTEN {CHANNEL}")
    while True:
        rows: list[Any] = conn.execute(CLAIM, [batch]).fetchall()
        if not rows:
            for _ in listener.notifies(timeout=1.0, stop_after=1):
                pass
            continue
        for _, payload in rows:
            noop(payload)
        conn.execute(ACK, [[row[0] for row in rows]])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run(args.dsn, args.batch)


if __name__ == "__main__":
    main()
