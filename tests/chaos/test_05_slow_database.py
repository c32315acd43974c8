"""Scenario 5, slow database: while two workers drain a queue, a side connection first holds
row locks on some pending jobs (claims skip them: FOR UPDATE SKIP LOCKED), then an exclusive
lock on the whole queue table (PostgreSQL's ACCESS EXCLUSIVE, MariaDB's LOCK TABLES ... WRITE:
claims, acks and heartbeats wait). Nothing is claimed twice, the locked jobs run once the
locks go, and the workers do not crash."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import MESSAGE_TABLE, QueueMessage
from testproject.chaos.models import ExecutionLog

from .harness import Fleet, serving, wait_for
from .invariants import Fault, check
from .record import Stopwatch, record
from .scale import pick

pytestmark = [pytest.mark.row_locks, pytest.mark.django_db(transaction=True)]

QUEUE = "chaos-slow"  # lease 5 s, 10 attempts
JOBS = pick(short=500, long=5_000)
ROW_LOCKED = 50
WORKERS, THREADS = 2, 4
HANDLER_MS = (5, 40)
ROW_LOCK_SECONDS = pick(short=1.5, long=5.0)
#: The long version holds the table past the 5 s lease: the heartbeats wait too.
TABLE_LOCK_SECONDS = pick(short=2.5, long=8.0)
SETTLE = 10.0


class Side:
    """A connection of its own, outside Django, that holds locks in its own transaction."""

    def __init__(self) -> None:
        db = connection.settings_dict
        self.postgres = connection.vendor == "postgresql"
        host, port = db.get("HOST") or "127.0.0.1", db.get("PORT")
        if self.postgres:
            import psycopg

            self.conn: Any = psycopg.connect(
                host=host, port=int(port or 5432), user=db["USER"], dbname=db["NAME"]
            )
        else:
            import MySQLdb

            self.conn = MySQLdb.connect(
                host=host, port=int(port or 3306), user=db["USER"],
                password=db["PASSWORD"], database=db["NAME"],
            )  # fmt: skip

    def lock_rows(self, ids: list[int]) -> None:
        marks = ", ".join(["%s"] * len(ids))
        sql = f"SELECT id FROM {MESSAGE_TABLE} WHERE id IN ({marks}) FOR UPDATE"
        self.conn.cursor().execute(sql, ids)

    def lock_table(self) -> None:
        """Every reader and writer of the queue table waits until release()."""
        if self.postgres:
            self.conn.execute(f"LOCK TABLE {MESSAGE_TABLE} IN ACCESS EXCLUSIVE MODE")
        else:
            self.conn.cursor().execute(f"LOCK TABLES {MESSAGE_TABLE} WRITE")

    def release(self) -> None:
        if not self.postgres:
            self.conn.cursor().execute("UNLOCK TABLES")
        self.conn.rollback()


@pytest.fixture
def side() -> Iterator[Side]:
    if connection.vendor not in ("postgresql", "mysql"):
        pytest.skip(f"no side connection written for {connection.vendor}")
    held = Side()
    try:
        yield held
    finally:
        held.conn.close()


def executed(ids: list[int] | None = None) -> int:
    runs = ExecutionLog.objects.filter(queue=QUEUE)
    return (runs.filter(job_id__in=ids) if ids is not None else runs).count()


def test_claims_skip_locked_rows_and_wait_out_a_table_lock_without_double_claims(
    fleet: Fleet, side: Side
):
    rng = random.Random(5)
    jobs = queue(QUEUE).enqueue_many(
        [{"i": i, "ms": round(rng.uniform(*HANDLER_MS), 1)} for i in range(JOBS)]
    )
    locked = [j.id for j in jobs[:ROW_LOCKED]]  # first in line: claims meet them first
    clock = Stopwatch()
    faults: list[Fault] = []

    # Row locks: claims skip the locked jobs and take the rest.
    rows_at = timezone.now()
    side.lock_rows(locked)
    for n in range(WORKERS):
        fleet.start(*serving(QUEUE, threads=THREADS), worker_id=f"slow-{n}")
    wait_for(lambda: executed() >= 100, timeout=30, what="jobs flowing past the locked rows")
    time.sleep(ROW_LOCK_SECONDS)
    ran_while_row_locked = executed(locked)
    side.release()
    faults.append(Fault("row locks", rows_at, timezone.now()).settled(SETTLE))

    # The table lock: everything that touches the queue table waits behind it.
    wait_for(lambda: executed() >= JOBS * 0.3, timeout=60, what="30% of the jobs run")
    table_at = timezone.now()
    side.lock_table()
    time.sleep(0.5)  # let the handlers already running finish and queue their acks
    frozen = executed()
    time.sleep(TABLE_LOCK_SECONDS - 0.5)
    started_while_table_locked = executed() - frozen
    side.release()
    faults.append(Fault("table lock", table_at, timezone.now()).settled(SETTLE))
    alive_after_lock = [w.alive() for w in fleet.started]

    wait_for(
        lambda: not QueueMessage.objects.filter(queue=QUEUE).exists(),
        timeout=pick(90, 300),
        what=f"drain of {JOBS} jobs",
    )
    codes = fleet.stop_all()
    table_lock = "an ACCESS EXCLUSIVE lock" if side.postgres else "LOCK TABLES ... WRITE"

    report = check(
        [j.id for j in jobs], faults, expect=dict.fromkeys((j.id for j in jobs), "acked")
    )
    record(
        5,
        "Slow database",
        f"{WORKERS} workers x {THREADS} threads drain {JOBS:,} jobs (lease 5 s) while a side "
        f"connection holds row locks on {ROW_LOCKED} of them for {ROW_LOCK_SECONDS:g} s, "
        f"then {table_lock} on the queue table for {TABLE_LOCK_SECONDS:g} s",
        report,
        clock.seconds(),
        {
            "ran_while_row_locked": ran_while_row_locked,
            "started_while_table_locked": started_while_table_locked,
        },
    )
    output = fleet.outputs()
    assert report.ok, report.summary() + output
    assert ran_while_row_locked == 0, "a claim took a row another transaction had locked"
    assert started_while_table_locked == 0, "a job was claimed through the table lock"
    assert executed(locked) >= ROW_LOCKED  # and they ran once the locks were gone
    assert all(alive_after_lock), output
    assert set(codes.values()) == {0}, output
