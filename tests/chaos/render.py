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
   the database was restarted or locked for longer than the lease, or its lease keeper
   could not renew the lease. Two runs of one job can then overlap in time. Handlers must
   be idempotent, or be [atomic consumers](consumers.md#atomic-consumers).
4. **Every claim counts an attempt.** Attempt numbers of one job's runs strictly increase,
   so two runs with the same number would mean one claim handed out twice; that never
   happens. A claim lost to a crash counts too, so a job that loses `max_attempts` claims
   is dead-lettered ("max attempts exceeded") instead of running without limit. The one
   exception: a graceful-shutdown release gives the attempt back, so the run after it
   carries the same number (the scenarios stop their workers only once the queue is
   drained, so the check allows no such pair).
5. **Bad input writes nothing.** Every public call either succeeds, and what it wrote reads
   back exactly (payloads bit for bit), or raises `AlkQueueError` (`InvalidName`,
   `InvalidOption`, `PayloadError`) with no row written. A payload of exactly
   `MAX_PAYLOAD_BYTES` (compact UTF-8 JSON) is accepted; one byte more is refused.

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

- **SQLite** has one writer at a time and no row locks: several worker processes at once
  (1, 2, 5, 6) are not what it is for, and there is no server to restart or cut off (3, 4).
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
