"""Write docs/reliability.md from the chaos records of one mode (`make chaos`: the long ones).

    python -m tests.chaos.render [--mode long] [--out docs/reliability.md]

Reads test-artifacts/chaos/<mode>/*.json (written by record.py, one per scenario and
database) and needs no Django: the page is a pure function of those records, the guarantees
below and the commit they were recorded at.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "chaos"
SCENARIOS = 10

HEADER = """\
# Reliability

The promise of a durable queue: **an enqueued job is never lost, and a finished job is never
acked twice.** The chaos suite (`tests/chaos/`) tests that promise under the faults real
deployments meet. Each scenario runs real `alk_worker` processes against PostgreSQL, and
against MariaDB and SQLite where it applies (see "Where each scenario runs" below), injects
its fault, and ends with the invariant check below. This page is written by the suite itself
(`make chaos`) from its last run; do not edit it by hand.

"""

GUARANTEES = """\
## Delivery guarantees

These are the statements the scenarios test. [Workers](worker.md#delivery-guarantees)
explains them for handler authors.

1. **Nothing is lost.** A job whose enqueue committed is, at every moment, in exactly one
   place: the live table (pending, scheduled or claimed) or the dead letters (with a
   reason), until it is acked, or an operator cancels or purges it. No worker crash, kill,
   network partition, database restart or lock changes that: a claimed job whose worker is
   gone comes back when its lease lapses.
2. **At most one ack per job.** An ack deletes the row only while it carries the claim
   token of that claim and the lease has not lapsed. Once deleted, the job cannot be
   claimed again. A worker that lost its claim (its lease lapsed and another worker
   claimed the job, or the job was cancelled) has its ack, retry or fail refused and its
   result discarded (logged as `lost`).
3. **At least once, with duplicates only after a lost claim.** A handler runs again for
   the same job only when the earlier run ended with a retry, or its claim was lost before
   the ack committed: its process was killed or exited, it was cut off from the database,
   the database was restarted or locked for longer than the lease, or its heartbeat service
   could not heartbeat the lease. Two runs of one job can then overlap in time. Handlers must
   be idempotent, or be [atomic consumers](consumers.md#atomic-consumers).
4. **Every claim counts an attempt.** Attempt numbers of one job's runs strictly increase,
   so two runs with the same number would mean one claim handed out twice; that never
   happens. A claim lost to a crash counts too, so a job that loses `max_attempts` claims
   is dead-lettered ("max attempts exceeded") instead of running without limit, and a job
   counted as crashing its worker twice is dead-lettered ("crashed its worker";
   [below](#what-a-handler-cannot-do-to-its-worker): what counts in which pool). The one
   exception: a graceful-shutdown release gives the attempt back, so the run after it
   carries the same number (the scenarios stop their workers only once the queue is
   drained, so the check allows no such pair).
5. **Bad input writes nothing.** Every public call either succeeds, and what it wrote reads
   back exactly (payloads bit for bit), or raises `AlkQueueError` (`InvalidName`,
   `InvalidOption`, `PayloadError`) with no row written. A payload of exactly
   `MAX_PAYLOAD_BYTES` (compact UTF-8 JSON) is accepted; one byte more is refused. Text no
   database can store (a NUL, which PostgreSQL's `text` and `jsonb` refuse, or an unpaired
   surrogate) is treated alike on every database: refused where it is input (a Task
   argument or a batch callback's payload with a NUL: `PayloadError`; a key, a batch or
   schedule name: `InvalidOption` or the system check), escaped where the library keeps it
   about a job (error texts and a task's return value store a NUL as `\\x00`), and a kept
   job's output that cannot be stored becomes a note in `output_error` while the job is
   acked ([security.md](security.md#text-no-database-can-store)).

## The invariant checked after every scenario

From the database and the handlers' own records (`testproject/chaos`): each handler run
inserts an `ExecutionLog` row in its own transaction when it starts and stamps its outcome
when it ends; each ack the queue confirms (the `job_succeeded` signal, sent only for the ids
the fenced `DELETE` returned) adds an `AckLog` row. For every enqueued job:

- it is acked (in neither table, one `AckLog` row, matching a run whose handler completed),
  dead (a dead letter with a reason), or live; never in two places, never in none (lost);
- it has at most one `AckLog` row (no double ack) and no run after the acked attempt;
- its runs have distinct, increasing attempt numbers (no double handout);
- each run beyond the first follows a retry or an exit of the run before it, or a fault
  injected into that run's worker (or into every worker) between the two claims.

An `AckLog` row is written after the ack commits, so a kill or an outage in between can
swallow it; such jobs are counted as "acks unrecorded", and are allowed only where the
scenario injected such a fault.

Scenario 1 injects no fault, so there every lease must hold: no worker may log a claim lost
or a heartbeat refused, no completed handler may have its result discarded, and only the
jobs planned to fail every attempt may end dead. On MariaDB the heartbeat service once fell
behind under that load and completed jobs ran again ([databases.md](databases.md#heartbeats)).

## What a handler cannot do to its worker

A handler is your code, and a worker thread runs it the way a web server runs a view:
whatever the handler does, the worker cleans up after it, fails that one attempt, and goes
on serving the other jobs. Issue 48's probe found handlers that could stop or quietly
corrupt a whole worker while its health check stayed green; each of these is now one
failed attempt.

- **The event loop.** An `async def` handler that raises `SystemExit` or
  `KeyboardInterrupt`, or stops the worker's event loop, no longer ends the loop. The
  exception is caught on the loop and raised again in the handler thread that waits for
  the coroutine, where it ends the attempt as a sync handler's would: `SystemExit` fails
  the attempt (retried by the policy), and `KeyboardInterrupt` lets the job go unsettled
  (its lease lapses, and it is reclaimed with the attempt counted). A handler that stops
  the loop finds it running again at once. Should the loop's thread end all the same,
  every job waiting on it fails with `EventLoopDied`, and the next async job starts a new
  loop. The process pool's children restart their own loops the same way.
- **The transaction.** After every handler call the worker puts the thread's connections
  back as they were before it, as Django's request cycle does after a view: atomic blocks
  entered and not exited are rolled back (as a `with atomic():` that raised would roll
  back), autocommit turned off is rolled back and turned on again, and a connection that
  cannot be rolled back is closed. The attempt fails with `TransactionLeftOpen`, whose
  message says what was left open on which database; what the handler wrote in that
  transaction is gone. The next job on that thread starts on a clean connection: its
  writes commit, and on SQLite the write lock is free. An atomic consumer whose handler
  leaves a block open inside the worker's own transaction rolls back all of it, its ack
  included. Both pools: handler threads and `--pool process` children. Not covered: the
  connection of the thread that runs an async handler's ORM calls (asgiref's
  `sync_to_async`), and a transaction begun with raw SQL (`cursor.execute("BEGIN")`),
  which Django does not know about.
- **The loops.** `job.progress(note=...)` refuses a note no database can store (an
  unpaired surrogate, as in a file name read from disk) with `InvalidOption`, at the call;
  a NUL is fine, the stored JSON escapes it. Should a report that cannot be written reach
  the heartbeat service anyway, the service logs the error, drops that report and extends
  the leases without it: no value a handler passes stops the loop that keeps every running
  job's lease.
- **The crash count.** A job that takes its worker down has one crash counted in its
  row's `crashes` column, and at its second crash it is dead-lettered with the reason
  `crashed its worker`, however many attempts it has left, so a poison job cannot take
  every restarted worker (or child) down in turn. What counts as a crash depends on the
  pool, because only a process that outlives the crash can count it:

  - *A loop of the worker died* (a bug, or a handler that broke it; the worker exits with
    status 70): a crash for each job whose handler was running, in both pools.
  - *The handler ended its process*: `os._exit(n)` (any `n`), a segfault or a bus error in
    C code, `abort()` (a failed C assertion), a floating-point trap, an illegal
    instruction (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL). Under `--pool process` a crash
    for the jobs of the child's call, counted by the worker, which sees the child's exit
    status. Under `--pool thread` (the default) the whole worker process dies with it:
    run by the `--processes` supervisor, a crash for each job whose handler that process
    was running, counted by the supervisor (see *what the `--processes` supervisor
    counts* below); run on its own (no `--processes`, or under systemd or Kubernetes
    alone) **not counted**, as nothing is left to count it.
  - *SIGKILL or SIGTERM from outside* (an operator, the OOM killer, a deploy; in the
    process pool also the pool's own signals at a time limit or a cancel): not counted, in
    either pool. The job is not to blame.

  Where a crash is counted, the attempt stays counted too (where a graceful shutdown's
  release gives it back). After a loop's death each running job is pending again at once,
  and the jobs claimed but not started, or awaiting their ack, are released as at any
  shutdown. In the process pool the crash is that attempt's failure, `WorkerChildDied:
  child 1234 killed by SIGSEGV` (or `... exited with status 3`), kept as its last error
  (and as the dead letter's `last_error` at the second crash) and retried on the
  consumer's curve like any failure; a first crash on the last attempt is dead as `max
  attempts exceeded`, and a `RetryPolicy(retry_on=...)` that does not list
  `WorkerChildDied` dead-letters it at once ("failed"). A child runs one handler call at a
  time, so only that call's jobs (one, or a batch consumer's batch) are counted.

  Where nothing is counted: a process-pool child killed from outside fails its attempt
  with `WorkerChildDied: child 1234 killed by SIGKILL`, and the job is retried as after any
  failure. A thread-pool worker that dies takes all its jobs with it: their leases lapse
  and they are reclaimed, each lapse having counted an attempt, so a job that kills its
  worker every time ends dead after `max_attempts` ("max attempts exceeded"), as scenario
  6 shows, and a job whose worker was killed from outside runs again, as scenario 2 shows.
  From the database, a worker killed by SIGKILL and one that a handler's segfault took down
  look the same (lapsed leases, a `Worker` row gone stale): a worker run without the
  supervisor counts no crash for either. **Run consumers whose handlers call C code that
  may crash (image and PDF libraries, ML runtimes, drivers built from C) under `--pool
  process`**, or at least under the supervisor with `--concurrency 1`: in the process pool
  a crash costs one child, not the worker and its other jobs, and a job that crashes its
  child twice is dead-lettered as `crashed its worker` instead of running `max_attempts`
  times. `tests/test_process_pool_crashes.py` tests the process pool's cases (`os._exit`,
  a segfault, SIGKILL) against real workers.

  *What the `--processes` supervisor counts.* Each worker process it starts tells it, on a
  pipe of their own, which jobs its handlers run: a line `started <job id> <claim token>`
  before a handler is called, `ended <job id> <claim token>` after it returns or raises (a
  batch consumer's call: a line per job). A few bytes per job and no database statement;
  the worker never waits for the supervisor: the pipe is non-blocking, and a line that
  finds it full (a supervisor that has fallen 64 KiB behind) or gone is dropped, and that
  job, should its process then crash, comes back when its lease lapses, as without a
  supervisor. When a worker process exits with a status of its own that is not one of the
  worker's ([worker.md](worker.md#exit-statuses): 0, 1, 2, 70, 75, 78; 3 and 4 come at
  start-up, before any job runs), or dies of one of the crash signals above, the
  supervisor counts a crash for each job that process had started and not ended, fenced by
  the claim token it was told (a job acked, retried or claimed again since is left alone),
  and each is pending again at once (the attempt counted) or, at its second crash, dead as
  `crashed its worker`, with `worker process 1234 exited with status 3` (or `... killed by
  SIGSEGV`) as its last error. A worker process killed from outside (SIGKILL, SIGTERM, the
  supervisor's own SIGKILL at a second stop signal) counts nothing: its jobs come back
  when their leases lapse, as scenario 2 requires. Status 70 (a loop died) is not counted
  again: the worker counted it itself. **Every job running in the dead process gets a
  crash**: the supervisor cannot tell which handler ended it. With `--concurrency 8`, an
  innocent job running beside a crashing one has a crash counted too, and is dead-lettered
  only if it runs beside a crash twice; with `--concurrency 1` the one running job is the
  one to blame. Jobs claimed ahead and not started, or awaiting their ack, are not counted
  (their handlers were not running), and come back when their leases lapse.
  `tests/test_supervisor_crashes.py` tests `os._exit`, a segfault and SIGKILL against a
  real supervisor and its worker processes.

Scenarios 12 and 13 run the first two under a thread-pool worker and a process-pool worker
at once. `tests/test_async_handlers.py`, `tests/test_worker_transactions.py`,
`tests/test_progress.py`, `tests/test_crashes.py` and `tests/test_supervisor_crashes.py`
test each case against real workers on every database.

"""

WHERE = """\
## Where each scenario runs

| # | Scenario | PostgreSQL | MariaDB | SQLite |
|---|---|---|---|---|
| 1 | Concurrency stress | yes | yes | no |
| 2 | Worker crash | yes | yes | no |
| 3 | Database restart | yes | no | no |
| 4 | Network partition | yes | no | no |
| 5 | Slow database | yes | yes | no |
| 6 | Poison jobs | yes | yes | no |
| 7 to 10 | Payload limits, bad input, admin security, migrations | yes | yes | yes |
| 12, 13 | Hostile handlers: transactions left open, async SystemExit | yes | yes | no |

- **SQLite** has one writer at a time and no row locks: several worker processes at once
  (1, 2, 5, 6, 12, 13) are not what it is for, and there is no server to restart or cut off (3, 4).
- **MariaDB** runs every scenario but two. Restarting the server (3) would also restart it
  for every other user of a shared machine, and the suite has no way to restart only a
  server of its own yet; the network partition (4) builds its network namespace around
  PostgreSQL's cluster configuration (`listen_addresses`, `pg_hba.conf`). In 5 the side
  connection locks the table with `LOCK TABLES ... WRITE` instead of PostgreSQL's
  `ACCESS EXCLUSIVE` lock.
- The scenarios run on each database's default dialect: PostgreSQL's and SQLite's own,
  and the ORM dialect on MariaDB.
"""

COLUMNS = (
    "#",
    "Scenario",
    "Database",
    "What it did",
    "Jobs",
    "Faults injected",
    "Runs",
    "Duplicates executed",
    "Jobs lost",
    "Double acks",
    "Result",
)


def load(mode: str) -> list[dict[str, Any]]:
    records = [json.loads(p.read_text()) for p in sorted((ARTIFACTS / mode).glob("*.json"))]
    return sorted(records, key=lambda r: (r["number"], r["database"]))


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _row(record: dict[str, Any]) -> tuple[str, ...]:
    f = record["figures"]
    injected = f["faults"] + f["handler_faults"]
    result = "pass" if record["passed"] else "**FAIL**"
    return (
        str(record["number"]),
        record["title"],
        record["database"],
        record["did"],
        f"{f['jobs']:,}",
        f"{injected:,}",
        f"{f['executions']:,}",
        f"{f['duplicates']:,}",
        str(f["lost"]),
        str(f["double_acks"]),
        result,
    )


def _details(record: dict[str, Any]) -> str:
    f = record["figures"]
    parts = [f"{record['number']} ({record['database']}, {record['seconds']:g} s):"]
    if f["executions"]:
        parts.append(f"acked {f['acked']:,}, dead {f['dead']:,}, live {f['live']:,};")
        if f["duplicate_causes"]:
            causes = ", ".join(f"{k} {v:,}" for k, v in f["duplicate_causes"].items())
            parts.append(f"duplicates after: {causes};")
        if f["dead_reasons"]:
            reasons = ", ".join(f'"{k}" {v:,}' for k, v in f["dead_reasons"].items())
            parts.append(f"dead letters: {reasons};")
        parts.append(
            f"results discarded (ack refused) {f['results_discarded']:,}, acks "
            f"unrecorded {f['acks_unrecorded']:,}, double handouts "
            f"{f['double_handouts']}, runs after an ack {f['ran_after_ack']}, "
            f"unexplained runs {f['unexplained']};"
        )
    details = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in record["details"].items())
    if details:
        parts.append(details + ".")
    for problem in record["problems"]:
        parts.append(f"\n  - {problem}")
    return "- " + " ".join(parts)


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    head = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    return head + (" with uncommitted changes" if git("status", "--porcelain").strip() else "")


def render(records: list[dict[str, Any]], mode: str) -> str:
    lines = [HEADER]
    if records:
        when = max(r["recorded_at"] for r in records)
        lines.append(f"## Last run\n\n{mode} versions, recorded {when}, at commit {commit()}.\n")
        lines.append("| " + " | ".join(COLUMNS) + " |")
        lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
        lines += ["| " + " | ".join(_cell(c) for c in _row(r)) + " |" for r in records]
        missing = sorted(set(range(1, SCENARIOS + 1)) - {r["number"] for r in records})
        if missing:
            lines.append(
                f"\nNo record for scenario(s) {', '.join(map(str, missing))}: "
                "skipped on this machine (see the test output for why)."
            )
        lines.append(
            "\nFor scenarios 8 and 9, Jobs counts the calls or requests accepted or made and "
            "Faults injected the bad inputs refused.\n\n### Details\n"
        )
        lines += [_details(r) for r in records]
        lines.append("")
    else:
        lines.append(f"No {mode} records yet: run `make chaos`.\n")
    lines.append(GUARANTEES)
    lines.append(
        "## Running it\n\n"
        "- `make test` runs the short versions (a few hundred to two thousand jobs each).\n"
        "- `make chaos` runs the long versions (`CHAOS_LONG=1`: 20,000 jobs for the stress "
        "test, 5,000 for the crash test, ...) on PostgreSQL, on SQLite and on MariaDB (the "
        "ORM dialect), then rewrites this page.\n"
        "- Scenarios 3 and 4 restart and reconfigure the local PostgreSQL cluster (4 "
        "does it through a network namespace it creates): they need root and "
        "`pg_ctlcluster`, and skip with the reason otherwise, or when "
        "`CHAOS_NO_CLUSTER_RESTARTS=1` says the cluster is shared.\n"
    )
    lines.append(WHERE)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="long", choices=("long", "short"))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "reliability.md")
    args = parser.parse_args()
    args.out.write_text(render(load(args.mode), args.mode))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
