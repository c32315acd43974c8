"""Claim+ack cost against the size and the history of the table.

One loop per batch size, in this process: claim k jobs (one statement, one commit), then ack
them (one statement, one commit); the figure is microseconds per job. Each scenario's loops
take turns with the same loops on a baseline of 10k pending in a database of its own on the
same server (refilled for every scenario), so that the ratio of the two reads the table's
state in the same seconds, not the drift of the machine's commit latency between scenarios
minutes apart. For django-alkqueue the loop is the public API (`Queue.claim`, then
`Queue.ack_batch` of the claimed ids); for the raw ceiling the statements of raw_worker.py.

Scenarios: 10k / 100k / 1M pending; 1M retained task results beside 10k pending; 1M dead
letters beside 10k pending; right after 1M jobs were claimed and acked with autovacuum off
on the queue table, then, for django-alkqueue, the same with the queue's clock moved past
the acked jobs' leases, then after a VACUUM. The burst's jobs hold an hour's lease, so that
none lapses during the first after-acks loops: that row reads the claim index's dead head
alone, at any second after the burst.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.db import connections
from django.utils import timezone

from . import common

BLOAT_BATCH = 10_000
# Left pending after the burst: three timed rows of 8,000 claims each.
BLOAT_LEFT = 30_000
FILL_CHUNK = 100_000
DEAD_CHUNK = 1_000
LEASE = 30.0  # the queue default
BURST_LEASE = 3600.0
#: The baseline's rows, the suffix of the database that holds them, and its Django alias
#: (bench/settings/alkqueue_admin.py).
BASELINE_PENDING = 10_000
BASELINE_SUFFIX = "_baseline"
BASELINE_ALIAS = "baseline"
#: Turns each side takes per repetition of the paired loops.
TURNS = 8
#: A quick run's big table (a full run's: 1M rows): enough rows beyond the baseline's 10k to
#: run every scenario through the harness, which is what CI checks.
QUICK_BIG = 20_000


class Loops:
    """The claim+ack loop of one system, and how to fill and empty its tables."""

    table = ""
    #: How the loop claims and acks, and how its rows are written, as the docs name them.
    method = fill = ""
    extras: dict[str, Callable[[int], None]] = {}

    def claim_ack(self, k: int) -> int: ...

    def fill_pending(self, n: int) -> None: ...

    def fill_burst(self, n: int) -> None:
        """n due jobs whose claims hold a lease of BURST_LEASE (where the system has leases)."""
        self.fill_pending(n)

    def shift_clock(self, seconds: float) -> bool:
        """Claim and ack `seconds` ahead of the real time (0: at the real time again).
        False where the system's claims read no clock of ours (it has no leases)."""
        return False

    def truncate(self) -> None: ...

    def install(self) -> None: ...  # the system's tables, in the (fresh) database

    def execute(self, sql: str) -> None: ...

    def query(self, sql: str, params: list[Any]) -> Any: ...

    def at(self, scenario: str) -> dict[str, Any]:
        """What to measure once a scenario's table is filled, beside the loops (the admin)."""
        return {}


def paired_cost(
    loops: Loops, baseline: Loops, k: int, iterations: int, reps: int
) -> dict[str, Any]:
    """Microseconds per job of claim k + ack on the scenario's loops and on the baseline's,
    median over `reps` repetitions of `iterations` loops each. Within a repetition the two
    take turns, TURNS each, the first alternating; the ratio is taken per repetition."""
    ours: list[float] = []
    base: list[float] = []
    ratios: list[float] = []
    chunk = max(1, iterations // TURNS)
    for rep in range(reps):
        spent, jobs = [0.0, 0.0], [0, 0]
        for turn, start in enumerate(range(0, iterations, chunk)):
            for side in (0, 1) if (turn + rep) % 2 == 0 else (1, 0):
                started = time.perf_counter()
                for _ in range(min(chunk, iterations - start)):
                    jobs[side] += (loops, baseline)[side].claim_ack(k)
                spent[side] += time.perf_counter() - started
        if min(jobs) < iterations * k:
            raise RuntimeError(f"only {jobs} of {iterations * k} jobs were claimed")
        ours.append(spent[0] * 1e6 / jobs[0])
        base.append(spent[1] * 1e6 / jobs[1])
        ratios.append(ours[-1] / base[-1])
    return {"us_per_job": common.figure(ours), "baseline_us_per_job": common.figure(base),
            "ratio": common.figure(ratios), "k": k, "iterations": iterations,
            "turns": TURNS}  # fmt: skip


def refill_baseline(baseline: Loops) -> None:
    """The baseline as the 10k-pending scenario leaves it: BASELINE_PENDING due jobs,
    vacuumed and analysed, then a CHECKPOINT."""
    baseline.truncate()
    baseline.fill_pending(BASELINE_PENDING)
    settle(baseline, f"VACUUM (ANALYZE) {baseline.table}")


def scenarios(
    make_loops: Callable[[], Loops], make_baseline: Callable[[], Loops], quick: bool
) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """The scenarios as separate steps (each makes its own loops, so that one interrupted by
    a server restart is run again alone). Their dicts merge into the system's "scale"."""
    # (iterations, repetitions) per batch size. Claims of 1 take two commits each, so the
    # machine's noise moves them most: more repetitions, and longer ones. Both loops together
    # claim 8,000 jobs, within the 10k-pending scenario's rows.
    loops_b1, loops_b100 = ((100, 1), (10, 1)) if quick else ((400, 5), (20, 3))
    big = QUICK_BIG if quick else 1_000_000
    sizes = [10_000, big] if quick else [10_000, 100_000, 1_000_000]

    def both(loops: Loops) -> dict[str, Any]:
        baseline = make_baseline()
        refill_baseline(baseline)
        return {"b1": paired_cost(loops, baseline, 1, *loops_b1),
                "b100": paired_cost(loops, baseline, 100, *loops_b100)}  # fmt: skip

    def pending(size: int) -> dict[str, Any]:
        loops = make_loops()
        loops.truncate()
        loops.fill_pending(size)
        settle(loops, f"VACUUM (ANALYZE) {loops.table}")
        out = {f"pending_{size}": both(loops), "method": loops.method, "fill": loops.fill}
        return {**out, **(loops.at("biggest") if size == sizes[-1] else {})}

    def extra(name: str) -> dict[str, Any]:
        loops = make_loops()
        loops.truncate()
        loops.extras[name](big)
        loops.fill_pending(10_000)
        settle(loops, "VACUUM (ANALYZE)")
        return {f"{name}_{big}": both(loops), **loops.at(name)}

    def after_acks() -> dict[str, Any]:
        loops = make_loops()
        out = bloat(loops, big, lambda: both(loops))
        loops.truncate()
        return out

    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        (f"{size:,} pending", lambda size=size: pending(size)) for size in sizes
    ]
    steps += [(f"{name} {big:,}", lambda name=name: extra(name)) for name in make_loops().extras]
    steps.append((f"after {big:,} acks, no VACUUM", after_acks))
    steps.append(("sizes", lambda: {"sizes": {"big": big}}))
    return steps


def settle(loops: Loops, *maintenance: str) -> None:
    """Before a timed loop: the scenario's maintenance, then a CHECKPOINT, so that the
    autovacuum of a table just filled, or a checkpoint writing its pages, does not run
    during the loop instead (the fills write hundreds of MB)."""
    for sql in maintenance:
        loops.execute(sql)
    loops.execute("CHECKPOINT")


def bloat(loops: Loops, big: int, both: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`big` jobs claimed and acked with autovacuum off; the loops right after, again with
    the acked jobs' leases lapsed (where the system has leases), then after a VACUUM."""
    loops.truncate()
    loops.fill_burst(big + BLOAT_LEFT)
    loops.execute(f"ANALYZE {loops.table}")
    loops.execute(f"ALTER TABLE {loops.table} SET (autovacuum_enabled = off)")
    try:
        started = time.perf_counter()
        done = 0
        while done < big:
            done += loops.claim_ack(min(BLOAT_BATCH, big - done))
        ack_rate = big / (time.perf_counter() - started)
        row = loops.query(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = %s", [loops.table]
        )
        settle(loops)  # no VACUUM: the dead rows are what this scenario measures
        out = {f"after_{big}_acked_no_vacuum": both()}
        if loops.shift_clock(BURST_LEASE + 60):
            out[f"after_{big}_acked_leases_lapsed"] = both()
            loops.shift_clock(0)
        settle(loops, f"VACUUM {loops.table}")
        after_vacuum = both()
    finally:
        loops.execute(f"ALTER TABLE {loops.table} RESET (autovacuum_enabled)")
    return {
        **out,
        f"after_{big}_acked_then_vacuum": after_vacuum,
        "bloat_ack_jobs_per_s": ack_rate,
        "bloat_dead_tuples": int(row[0]) if row else -1,
    }


# -- django-alkqueue: the public API, and the models for the rows no API writes in bulk ---------


class AlkQueueLoops(Loops):
    QUEUE = "scale"
    method = "`Queue.claim`, then `Queue.ack_batch` of the claimed ids (its public API)"
    fill = (
        "written with `enqueue_many`, the dead letters being jobs that expired and were swept "
        "(`Queue.sweep_expired`), the retained task results through the `TaskResult` model"
    )

    def __init__(
        self, admin: Callable[[str], dict[str, Any]] | None = None, using: str = "default"
    ) -> None:
        from django_alkqueue.models import QueueMessage

        self.using = using
        self.table = QueueMessage._meta.db_table
        self.admin = admin
        self.shift = timedelta(0)
        self.extras = {"retained_results": self.fill_results, "dead_letters": self.fill_dead}
        self.queue = self._queue()

    def _queue(self, ahead: timedelta | None = None, **options: Any) -> Any:
        """The scale queue, its clock `ahead` of the real time (default: the loops' shift)."""
        from django_alkqueue import queue

        shift = self.shift if ahead is None else ahead
        return queue(self.QUEUE, using=self.using, clock=lambda: timezone.now() + shift,
                     **options)  # fmt: skip

    def claim_ack(self, k: int) -> int:
        handles = self.queue.claim("bench-scale", k)
        self.queue.ack_batch([h.job.id for h in handles])
        return len(handles)

    def install(self) -> None:
        call_command("migrate", database=self.using, verbosity=0)

    def execute(self, sql: str) -> None:
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql)

    def query(self, sql: str, params: list[Any]) -> Any:
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    def _enqueue(self, n: int, **options: Any) -> None:
        q = self._queue(**options)
        for start in range(0, n, FILL_CHUNK):
            q.enqueue_many({"i": i} for i in range(start, min(n, start + FILL_CHUNK)))

    def fill_pending(self, n: int) -> None:
        self._enqueue(n, lease=LEASE)

    def fill_burst(self, n: int) -> None:
        self._enqueue(n, lease=BURST_LEASE)

    def shift_clock(self, seconds: float) -> bool:
        self.shift = timedelta(seconds=seconds)
        self.queue = self._queue()
        return True

    def fill_dead(self, n: int) -> None:
        """n dead letters the way a queue makes them: jobs that expired, swept. A sweep stamps
        its dead letters with one time, so DEAD_CHUNK per sweep keeps them spread in time, as
        dead letters gathered over weeks are (the admin lists them by that time)."""
        later = self._queue(ahead=timedelta(hours=1))
        for start in range(0, n, DEAD_CHUNK):
            self._enqueue(min(DEAD_CHUNK, n - start), expires=60.0)
            later.sweep_expired()

    def fill_results(self, n: int) -> None:
        """n succeeded task results, as the django.tasks backend keeps them (no API writes
        results in bulk, so through the model)."""
        from django_alkqueue.models import TaskResult

        now = timezone.now()
        for start in range(0, n, FILL_CHUNK):
            TaskResult.objects.using(self.using).bulk_create(
                TaskResult(job_id=10_000_000_000 + i, backend="default", queue="default",
                           task_path="bench.jobs.task", status="SUCCESSFUL",
                           worker_ids=["bench"], enqueued_at=now, started_at=now,
                           finished_at=now, last_attempted_at=now,
                           expires_at=now + timedelta(days=7))
                for i in range(start, min(n, start + FILL_CHUNK))
            )  # fmt: skip

    def truncate(self) -> None:
        from django_alkqueue.models import DeadLetter, QueueMessage, TaskResult

        tables = ", ".join(m._meta.db_table for m in (QueueMessage, TaskResult, DeadLetter))
        self.execute(f"TRUNCATE {tables}")

    def at(self, scenario: str) -> dict[str, Any]:
        page = {"biggest": "jobs", "dead_letters": "dead_letters"}.get(scenario)
        if self.admin is None or page is None:
            return {}
        return {f"admin_{page}": self.admin(page)}


# -- raw psycopg ----------------------------------------------------------------------------------


class RawLoops(Loops):
    table = "raw_job"
    method = "the psycopg statements of its worker loop"

    def __init__(self, database: str) -> None:
        from .systems.raw_worker import ACK, CLAIM

        self.conn = common.connect(database)
        self.claim_sql, self.ack_sql = CLAIM, ACK
        self.extras = {}

    def claim_ack(self, k: int) -> int:
        rows = self.conn.execute(self.claim_sql, [k]).fetchall()
        self.conn.execute(self.ack_sql, [[r[0] for r in rows]])
        return len(rows)

    def install(self) -> None:
        from .systems.raw import create_table

        create_table(self.conn)

    def execute(self, sql: str) -> None:
        self.conn.execute(sql)

    def query(self, sql: str, params: list[Any]) -> Any:
        return self.conn.execute(sql, params).fetchone()

    def fill_pending(self, n: int) -> None:
        self.conn.execute(
            "INSERT INTO raw_job (payload, run_at) SELECT json_build_object('i', g), "
            "now() - interval '2 hours' + g * interval '1 microsecond' "
            "FROM generate_series(1, %s) g",
            [n],
        )

    def truncate(self) -> None:
        self.execute("TRUNCATE raw_job")
