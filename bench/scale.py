"""Claim+ack cost against the size and the history of the table.

One loop per batch size, in this process: claim k jobs (one statement, one commit), then ack
them (one statement, one commit); the figure is microseconds per job. Each scenario's loops
take turns with the same loops on a baseline of 10k pending in a database of its own on the
same server (refilled for every scenario), so that the ratio of the two reads the table's
state in the same seconds, not the drift of the machine's commit latency between scenarios
minutes apart (which moves a claim of 1, two commits, by tens of percent). After the loops, one
claim of 1 runs under EXPLAIN (ANALYZE, BUFFERS), rolled back: the pages it touched. For
django-alkqueue the loop goes through the library (`Queue.claim` + `ack_handles`, what the
worker calls); for the raw ceiling through the psycopg statements of raw_worker.py. Rows are
filled with generate_series; a scenario's rows are TRUNCATEd before the next one.

Scenarios: 10k / 100k / 1M pending; 1M retained task results beside 10k pending; 1M dead
letters beside 10k pending; right after 1M jobs were claimed and acked with autovacuum off
on the queue table (dead tuples at the head of the claim index), then, for django-alkqueue,
the same with the clock moved past the acked jobs' leases, then after a VACUUM.

The burst's jobs hold an hour's lease, so that none lapses during the loops: the first
after-acks row measures the claim index's dead head alone, at any second after the burst.
The second moves the queue's clock past those leases, so the claim's look for lapsed leases
also walks the acked rows' dead entries in the lease index. (With the default 30 s lease,
they lapse while the loops run, and each run read a different mix of the two.)

Plus, untimed, how densely the claim index packs due jobs appended in handout order: alone,
and with jobs waiting for a retry (run_at an hour ahead) sorting after them, as on any
queue with retries or scheduled jobs. The walk past dead entries reads their leaf pages, so
this density sets its length.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from . import common

BLOAT_BATCH = 10_000
# Left pending after the burst: three timed rows of 8,000 claims each.
BLOAT_LEFT = 30_000
LEASE = 30.0  # the queue default
BURST_LEASE = 3600.0
INDEX_FILL_ROWS = 100_000
WAITING_FOR_RETRY = 1_000
#: The baseline's rows, the suffix of the database that holds them, and its Django alias
#: (bench/settings/alkqueue_admin.py).
BASELINE_PENDING = 10_000
BASELINE_SUFFIX = "_baseline"
BASELINE_ALIAS = "baseline"
#: Turns each side takes per repetition of the paired loops.
TURNS = 8


class Loops:
    """The claim+ack loop of one system, and how to fill and empty its tables."""

    def claim_ack(self, k: int) -> int:
        raise NotImplementedError

    def fill_pending(self, n: int) -> None:
        raise NotImplementedError

    def fill_burst(self, n: int) -> None:
        """n due jobs whose claims hold a lease of BURST_LEASE (where the system has leases)."""
        self.fill_pending(n)

    def shift_clock(self, seconds: float) -> bool:
        """Claim and ack `seconds` ahead of the real time (0: at the real time again).
        False where the system's claims read no clock of ours (it has no leases)."""
        return False

    def fill_waiting(self, n: int) -> None:
        """n jobs due an hour from now: they sort after every due job in the claim index."""
        raise NotImplementedError

    def truncate(self) -> None:
        raise NotImplementedError

    def install(self) -> None:
        """The system's tables in the (fresh) database these loops run on."""
        raise NotImplementedError

    def execute(self, sql: str) -> None:
        raise NotImplementedError

    def explain_claim(self) -> Any:
        """EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) of one claim of 1, rolled back."""
        raise NotImplementedError

    table = ""
    claim_index = ""
    extras: dict[str, Callable[[int], None]] = {}


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
    a server restart is run again alone). Their dicts merge into the system's "scale".
    `make_baseline`: loops on the baseline's database, its tables installed."""
    # (iterations, repetitions) per batch size. Claims of 1 take a few commits each, so the
    # machine's noise moves them most: more repetitions, and longer ones. Both loops together
    # claim 8,000 jobs, within the 10k-pending scenario's rows.
    loops_b1, loops_b100 = ((100, 1), (10, 1)) if quick else ((400, 5), (20, 3))
    big = 100_000 if quick else 1_000_000
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]

    def both(loops: Loops) -> dict[str, Any]:
        baseline = make_baseline()
        refill_baseline(baseline)
        timed = {"b1": paired_cost(loops, baseline, 1, *loops_b1),
                 "b100": paired_cost(loops, baseline, 100, *loops_b100)}  # fmt: skip
        return {**timed, "claim_pages": claim_pages(loops.explain_claim())}

    def pending(size: int) -> dict[str, Any]:
        loops = make_loops()
        loops.truncate()
        loops.fill_pending(size)
        settle(loops, f"VACUUM (ANALYZE) {loops.table}")
        out = {f"pending_{size}": both(loops)}
        if size == sizes[-1] and hasattr(loops, "at_biggest"):
            out.update(loops.at_biggest())
        return out

    def extra(name: str) -> dict[str, Any]:
        loops = make_loops()
        loops.truncate()
        loops.fill_pending(10_000)
        loops.extras[name](big)
        settle(loops, "VACUUM (ANALYZE)")
        out = {f"{name}_{big}": both(loops)}
        if hasattr(loops, f"at_{name}"):
            out.update(getattr(loops, f"at_{name}")())
        return out

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
    steps.append(("claim index density", lambda: index_fill(make_loops())))
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
        dead = _dead_tuples(loops)
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
        "bloat_dead_tuples": dead,
    }


def index_fill(loops: Loops) -> dict[str, Any]:
    """Pages of the claim index holding INDEX_FILL_ROWS due jobs appended in handout order,
    alone and appended in front of WAITING_FOR_RETRY jobs due later. A B-tree splits its
    last page at the fillfactor (90% full) but a full page elsewhere in half, and appends in
    front of later entries never come back to the left half."""
    out = {}
    for name, waiting in (("alone", 0), ("before_waiting", WAITING_FOR_RETRY)):
        loops.truncate()
        if waiting:
            loops.fill_waiting(waiting)
        loops.fill_pending(INDEX_FILL_ROWS)
        pages = loops.query("SELECT pg_relation_size(%s::regclass) / 8192", [loops.claim_index])
        out[name] = {"due": INDEX_FILL_ROWS, "waiting": waiting, "pages": int(pages[0]),
                     "due_per_page": INDEX_FILL_ROWS / int(pages[0])}  # fmt: skip
    loops.truncate()
    return {"index_fill": out}


def claim_pages(explained: Any) -> dict[str, Any]:
    """Where one claim's time goes on the server, taken after a scenario's timed loops: the
    pages (buffers hit or read, index and heap together) each index scan of the plan touched,
    keyed by index name, and the statement's execution time. A claim that walks past dead
    index entries shows here as thousands of pages where a clean index needs a handful."""
    root = explained[0] if isinstance(explained, list) else json.loads(explained)[0]
    pages: dict[str, int] = {}

    def walk(node: dict[str, Any]) -> None:
        if "Index Name" in node:
            touched = node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)
            pages[node["Index Name"]] = pages.get(node["Index Name"], 0) + touched
        for child in node.get("Plans", []):
            walk(child)

    walk(root["Plan"])
    return {"pages_by_index": pages, "execution_ms": root["Execution Time"]}


def _dead_tuples(loops: Loops) -> int:
    row = loops.query(  # type: ignore[attr-defined]
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = %s", [loops.table]
    )
    return int(row[0]) if row else -1


# -- django-alkqueue ------------------------------------------------------------------------------

FILL_MESSAGES = """
INSERT INTO alkqueue_message (queue, payload, priority, attempts, max_attempts, backoff_base,
    lease, retention, run_at, enqueued_at)
SELECT 'scale', '{"i":' || g || '}', 0, 0, 5, 5.0, %s, 604800,
    now() - interval '2 hours' + g * interval '1 microsecond', now()
FROM generate_series(1, %s) g
"""
FILL_WAITING = """
INSERT INTO alkqueue_message (queue, payload, priority, attempts, max_attempts, backoff_base,
    lease, retention, run_at, enqueued_at, last_error)
SELECT 'scale', '{"i":' || g || '}', 0, 1, 5, 5.0, 30.0, 604800,
    now() + interval '1 hour' + g * interval '1 microsecond', now(), 'failed'
FROM generate_series(1, %s) g
"""
FILL_RESULTS = """
INSERT INTO alkqueue_taskresult (job_id, backend, task_path, queue, status, args, kwargs,
    return_value, errors, worker_ids, enqueued_at, started_at, finished_at, last_attempted_at,
    expires_at)
SELECT 10000000000 + g, 'default', 'bench.jobs.task', 'default', 'SUCCESSFUL', '[]', '{}',
    'null', '[]', '["bench"]', now(), now(), now(), now(), now() + interval '7 days'
FROM generate_series(1, %s) g
"""
FILL_DEAD = """
INSERT INTO alkqueue_deadletter (job_id, queue, payload, priority, attempts, max_attempts,
    backoff_base, lease, retention, run_at, enqueued_at, claimed_by, claimed_at, died_at,
    reason, last_error)
SELECT 20000000000 + g, 'scale', '{"i":1}', 0, 5, 5, 5.0, 30.0, 604800, now(), now(),
    'bench', now(), now() - g * interval '1 millisecond', 'failed', 'failed'
FROM generate_series(1, %s) g
"""


class AlkQueueLoops(Loops):
    table = "alkqueue_message"
    claim_index = "alkqueue_pending_idx"

    def __init__(
        self, admin: Callable[[str], dict[str, Any]] | None = None, using: str = "default"
    ) -> None:
        from django_alkqueue import queue

        self.using = using
        self.queue = queue("scale", using=using)
        self.admin = admin
        self.extras = {"retained_results": self.fill_results, "dead_letters": self.fill_dead}

    def claim_ack(self, k: int) -> int:
        from django_alkqueue.queues import ack_handles

        handles = self.queue.claim("bench-scale", k)
        return len(ack_handles(handles, self.using))

    def install(self) -> None:
        from django.core.management import call_command

        call_command("migrate", database=self.using, verbosity=0)

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        from django.db import connections

        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)

    def query(self, sql: str, params: list[Any]) -> Any:
        from django.db import connections

        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    def explain_claim(self) -> Any:
        from django.db import connections, transaction

        from django_alkqueue.sql.postgresql import CLAIM, claim_params

        params = claim_params("scale", "bench-scale", 1, self.queue.clock(), uuid.uuid4())
        connection = connections[self.using]
        with transaction.atomic(using=self.using), connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + CLAIM, params)
            explained = cursor.fetchone()[0]
            transaction.set_rollback(True, using=self.using)
        return explained

    def fill_pending(self, n: int) -> None:
        self.execute(FILL_MESSAGES, [LEASE, n])

    def fill_burst(self, n: int) -> None:
        self.execute(FILL_MESSAGES, [BURST_LEASE, n])

    def shift_clock(self, seconds: float) -> bool:
        from datetime import timedelta

        from django.utils import timezone

        from django_alkqueue import queue

        shift = timedelta(seconds=seconds)
        self.queue = queue("scale", using=self.using, clock=lambda: timezone.now() + shift)
        return True

    def fill_waiting(self, n: int) -> None:
        self.execute(FILL_WAITING, [n])

    def fill_results(self, n: int) -> None:
        self.execute(FILL_RESULTS, [n])

    def fill_dead(self, n: int) -> None:
        self.execute(FILL_DEAD, [n])

    def truncate(self) -> None:
        self.execute("TRUNCATE alkqueue_message, alkqueue_taskresult, alkqueue_deadletter")

    def at_biggest(self) -> dict[str, Any]:
        return {"admin_jobs": self.admin("jobs")} if self.admin else {}

    def at_dead_letters(self) -> dict[str, Any]:
        return {"admin_dead_letters": self.admin("dead_letters")} if self.admin else {}


# -- raw psycopg ----------------------------------------------------------------------------------


class RawLoops(Loops):
    table = "raw_job"
    claim_index = "raw_job_pending"

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

    def execute(self, sql: str, params: list[Any] | None = None) -> None:
        self.conn.execute(sql, params)

    def query(self, sql: str, params: list[Any]) -> Any:
        return self.conn.execute(sql, params).fetchone()

    def explain_claim(self) -> Any:
        with self.conn.transaction(force_rollback=True):
            explained = self.conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + self.claim_sql, [1]
            ).fetchone()
        return explained[0] if explained else None

    def fill_pending(self, n: int) -> None:
        self._fill(n, "now() - interval '2 hours'")

    def fill_waiting(self, n: int) -> None:
        self._fill(n, "now() + interval '1 hour'")

    def _fill(self, n: int, start: str) -> None:
        self.execute(
            "INSERT INTO raw_job (payload, run_at) SELECT json_build_object('i', g), "
            f"{start} + g * interval '1 microsecond' FROM generate_series(1, %s) g",
            [n],
        )

    def truncate(self) -> None:
        self.execute("TRUNCATE raw_job")
