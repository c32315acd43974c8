"""Where the time of one django-alkqueue enqueue goes: the same single-row enqueue, one
transaction each, peeled layer by layer (jobs/s of each, no worker running):

0. the raw ceiling's own call (bench/systems/raw.py: one INSERT of one JSON column into
   its raw_job table, created beside the library's table for this measurement);
1. psycopg, a plain INSERT of the library's columns (the table and its indexes);
2. psycopg, the library's own statement for an enqueue that sends no NOTIFY (INSERT ...
   RETURNING id), the one most calls of a burst run (sql/wake_pacing.py);
3. the same statement through Django's cursor (client-side binding, never prepared);
4. the same statement through the library's hot path on Django's connection
   (`sql/hot_cursor.py`: server-side binding, prepared; in autocommit, as here, the
   library's own prepared statement run on psycopg's libpq connection without a cursor,
   `sql/prepared.py`);
5. `Queue.enqueue` (validation, encoding, `Job` values, the `job_enqueued` signal, and a
   NOTIFY once per ALKQUEUE["NOTIFY_WINDOW"]);
6. psycopg, the library's statement for an enqueue that notifies (the same INSERT, and
   pg_notify), for comparison with layer 2 (no worker listens here).

The psycopg layers (0, 1, 2 and 6) run on one kept cursor, prepared, as the library's hot
path and the raw ceiling's own enqueue do: psycopg's `Connection.execute` makes a new cursor
per call, and its set-up (24 to 29 us a call here) would be read as the statement's cost.

`python_alone` times the Python of `Queue.enqueue` above its statement, which is answered
in-process (the kept cursor and sql/prepared.py's statements stubbed): back to back (warm
caches), and with SWEEP_BYTES of memory written between calls, as the server's work during
a real call's wait leaves the caches of a small machine.

The layers take turns in chunks of CHUNK calls, so that a commit latency that drifts
during the run (other work on the machine) weighs on every layer alike. Layers 0 and 5 give
the single-enqueue target its side-by-side ratio (bench/targets.py).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from . import common
from .systems import raw

QUEUE = "breakdown"
CHUNK = 50
SWEEP_BYTES = 16 * 1024 * 1024
CACHE_LINE = 64
RAW_LAYER = "the raw ceiling's call: INSERT of one JSON column into raw_job"
LIBRARY_LAYER = "Queue.enqueue"


def _row(i: int, width: int) -> list[Any]:
    """The first `width` values of a row in INSERT_FIELDS order."""
    now = datetime.now(UTC)
    return [QUEUE, json.dumps({"i": i}, separators=(",", ":")), 0, 0, 5, 5.0, 30.0, 604800.0,
            now, now, None, None][:width]  # fmt: skip


def _library_statements() -> tuple[str, str, tuple[str, ...]]:
    """The library's single-row enqueue statements for a job without a unique key, the one
    sent within the NOTIFY window and the one that notifies, and the columns they write."""
    from django_alkqueue.sql import base, postgresql

    return postgresql._INSERT_KEYLESS_QUIET, postgresql._INSERT_KEYLESS, base.KEYLESS_INSERT_FIELDS


def measure(database: str, n: int, reps: int) -> dict[str, Any]:
    from django.db import connections

    from django_alkqueue import queue
    from django_alkqueue.sql.hot_cursor import fetch_all

    # This thread's wrapper itself, as the library uses it: every attribute read through
    # the `django.db.connection` proxy costs a lookup of its own.
    connection = connections["default"]

    quiet_sql, notify_sql, fields = _library_statements()
    placeholders = "(" + ", ".join(["%s"] * len(fields)) + ")"
    plain_sql = f"INSERT INTO alkqueue_message ({', '.join(fields)}) VALUES {placeholders}"
    conn = common.connect(database)
    raw.create_table(conn)
    q = queue(QUEUE)

    kept = conn.cursor()

    def raw_ceiling(i: int) -> None:
        kept.execute(raw.INSERT, [json.dumps({"i": i})], prepare=True)

    def psycopg_plain(i: int) -> None:
        kept.execute(plain_sql, _row(i, len(fields)), prepare=True)

    def psycopg_library_sql(i: int) -> None:
        kept.execute(quiet_sql, _row(i, len(fields)), prepare=True)
        kept.fetchall()

    def django_cursor(i: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute(quiet_sql, _row(i, len(fields)))
            cursor.fetchall()

    def hot_path(i: int) -> None:
        fetch_all(connection, quiet_sql, _row(i, len(fields)))

    def psycopg_notifying_sql(i: int) -> None:
        kept.execute(notify_sql, [*_row(i, len(fields)), QUEUE], prepare=True)
        kept.fetchall()

    def library(i: int) -> None:
        q.enqueue({"i": i})

    layers = [(RAW_LAYER, raw_ceiling),
              ("psycopg: plain INSERT", psycopg_plain),
              ("psycopg: the library's INSERT ... RETURNING id (no NOTIFY)", psycopg_library_sql),
              ("Django cursor: the same statement", django_cursor),
              ("the library's hot path on Django's connection: the same statement, prepared, "
               "without psycopg's cursor",
               hot_path),
              (LIBRARY_LAYER, library),
              ("psycopg: the library's INSERT ... RETURNING id + pg_notify",
               psycopg_notifying_sql)]  # fmt: skip
    rates: dict[str, list[float]] = {label: [] for label, _ in layers}
    try:
        for _ in range(reps):
            conn.execute(f"TRUNCATE alkqueue_message, {raw.TABLE}")
            spent = dict.fromkeys(rates, 0.0)
            for start in range(0, n, CHUNK):
                for label, call in layers:
                    started = time.perf_counter()
                    for i in range(start, min(start + CHUNK, n)):
                        call(i)
                    spent[label] += time.perf_counter() - started
            for label in rates:
                rates[label].append(n / spent[label])
        alone = python_alone(n, reps)
        conn.execute("TRUNCATE alkqueue_message")
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {raw.TABLE}")
        conn.close()
    return {"n": n, "chunk": CHUNK, "layers": {k: common.figure(v) for k, v in rates.items()},
            "python_alone": alone}  # fmt: skip


class _Answered:
    """Stands in for the library's kept psycopg cursor and its prepared statements
    (sql/prepared.py): every statement answers id 1."""

    closed = False

    def execute(self, *args: Any, **kwargs: Any) -> None:
        pass

    def fetchall(self) -> list[tuple[int]]:
        return [(1,)]

    def fetch_all(self, *args: Any) -> list[tuple[int]]:
        return [(1,)]


def python_alone(n: int, reps: int) -> dict[str, Any]:
    """Microseconds of Python per `Queue.enqueue` with no server: warm and cold caches."""
    from django.db import connections

    from django_alkqueue import queue
    from django_alkqueue.sql import hot_cursor

    connection = connections["default"]
    q = queue(QUEUE)
    q.enqueue({"i": 0})  # connected, with the library's cursor kept
    conn = connection.connection
    kept = getattr(conn, hot_cursor._KEPT)
    sweep = bytearray(SWEEP_BYTES)
    lines = b"\x01" * (SWEEP_BYTES // CACHE_LINE)
    spent: dict[str, list[float]] = {"warm": [], "cold": []}
    setattr(conn, hot_cursor._KEPT, (_Answered(), kept[1], _Answered()))
    try:
        for _ in range(reps):
            for mode in spent:
                total = 0.0
                for i in range(n):
                    if mode == "cold":
                        sweep[::CACHE_LINE] = lines  # one write per cache line
                    started = time.perf_counter()
                    q.enqueue({"i": i})
                    total += time.perf_counter() - started
                spent[mode].append(total / n * 1e6)
    finally:
        setattr(conn, hot_cursor._KEPT, kept)
    return {"n": n, "sweep_bytes": SWEEP_BYTES, **{k: common.figure(v) for k, v in spent.items()}}
