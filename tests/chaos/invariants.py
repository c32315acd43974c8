"""The invariant every chaos scenario ends with: nothing lost, nothing acked twice.

Read from the database after a run, for the ids the scenario enqueued:

- the queue's tables: alkqueue_message (live jobs) and alkqueue_deadletter;
- what the handlers wrote (testproject/chaos/models.py): ExecutionLog, a row per execution
  inserted when the handler starts and stamped with its outcome when it ends, and AckLog, a
  row per ack the queue confirmed (the worker sends job_succeeded only for the ids its fenced
  DELETE returned).

Every enqueued job must be in exactly one end state:

- acked: in neither table, with exactly one AckLog row, matching an execution whose handler
  completed (outcome "completed", same attempt and claim);
- dead: a dead letter with a reason ("max attempts exceeded" only at attempts = max_attempts),
  and no ack;
- live: still in the queue (a failure when the scenario drained its queue).

A job in neither table without a completed execution has vanished: lost. Two AckLog rows for
one job are a double ack; an execution at a later attempt than the acked one ran a job that
was already done. Two executions with the same attempt number are a double handout: every
claim counts an attempt, so only a claim handed out twice can produce them.

Executions beyond a job's first must each be explained by how the one before it ended:
- "failed": the handler raised, the job was retried (a retry);
- "exited": the handler took its process down (os._exit);
- otherwise (completed but not acked, blocked, or cut short) the claim must have been lost to
  an injected fault: a Fault naming that worker (or every worker) whose time window overlaps
  the span from the earlier claim to the later one. Attempt numbers that were claimed but
  never reached a handler (a kill between claim and start) need such a fault too.

The ack record is written after the ack commits, so a database outage, or a kill of the
worker between the two writes, can swallow it: where the scenario restarted or cut off the
database, or a fault hit the worker that completed the job, an acked job with a completed
execution but no AckLog row is counted (acks_unrecorded) instead of failed.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime, timedelta

from django_alkqueue.jobs import MAX_ATTEMPTS_EXCEEDED
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.chaos.models import AckLog, ExecutionLog

#: Fault kinds after which an ack record may be missing (the database was unreachable).
DATABASE_FAULTS = {"database restart", "network partition"}
#: Handler outcomes that explain the next execution on their own.
SELF_EXPLAINED = {"failed": "retry", "exited": "process exit"}
_CHUNK = 5000


@dataclasses.dataclass(frozen=True)
class Fault:
    """An injected fault: what, when, and which workers it hit (None: all of them)."""

    kind: str
    started: datetime
    ended: datetime
    workers: frozenset[str] | None = None
    #: The queues whose jobs it could hit (None: every queue).
    queues: frozenset[str] | None = None

    def covers(self, worker: str | None, since: datetime, until: datetime) -> bool:
        if self.workers is not None and worker not in self.workers:
            return False
        return self.started <= until and self.ended >= since

    def hits(self, queue: str) -> bool:
        return self.queues is None or queue in self.queues

    def settled(self, seconds: float) -> Fault:
        """The same fault, counted as lasting `seconds` longer: a connection broken by it
        fails only at its next use, which may come a little later."""
        return dataclasses.replace(self, ended=self.ended + timedelta(seconds=seconds))


@dataclasses.dataclass
class Figures:
    jobs: int = 0
    acked: int = 0
    dead: int = 0
    live: int = 0
    executions: int = 0
    #: Executions beyond each job's first.
    duplicates: int = 0
    faults: int = 0
    #: Executions whose handler failed, exited or blocked because the payload said so.
    handler_faults: int = 0
    lost: int = 0
    double_acks: int = 0
    double_handouts: int = 0
    ran_after_ack: int = 0
    unexplained: int = 0
    #: Handlers that completed but whose ack was refused (the claim had been lost).
    results_discarded: int = 0
    acks_unrecorded: int = 0
    duplicate_causes: dict[str, int] = dataclasses.field(default_factory=dict)
    dead_reasons: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Report:
    figures: Figures
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self, limit: int = 30) -> str:
        shown = "\n".join(self.problems[:limit])
        more = len(self.problems) - limit
        tail = f"\n... and {more} more" if more > 0 else ""
        return f"{len(self.problems)} invariant violation(s):\n{shown}{tail}\n{self.figures}"


@dataclasses.dataclass(frozen=True)
class _Run:
    id: int
    queue: str
    worker: str
    attempt: int
    claimed_at: datetime | None
    started_at: datetime
    outcome: str


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


def _load(ids: list[int]) -> tuple[set[int], dict[int, DeadLetter], dict, dict]:
    live: set[int] = set()
    dead: dict[int, DeadLetter] = {}
    runs: dict[int, list[_Run]] = defaultdict(list)
    acks: dict[int, list[AckLog]] = defaultdict(list)
    for chunk in _chunks(ids):
        live.update(QueueMessage.objects.filter(pk__in=chunk).values_list("pk", flat=True))
        dead.update((d.job_id, d) for d in DeadLetter.objects.filter(job_id__in=chunk))
        rows = ExecutionLog.objects.filter(job_id__in=chunk).values_list(
            "job_id", "id", "queue", "worker_id", "attempt", "claimed_at", "started_at", "outcome"
        )
        for job_id, *fields in rows:
            runs[job_id].append(_Run(*fields))
        for ack in AckLog.objects.filter(job_id__in=chunk):
            acks[ack.job_id].append(ack)
    for job_runs in runs.values():
        job_runs.sort(key=lambda r: (r.claimed_at or r.started_at, r.id))
    return live, dead, runs, acks


def check(
    job_ids: Collection[int],
    faults: Iterable[Fault] = (),
    *,
    expect: Mapping[int, str] | None = None,
    drained: bool = True,
) -> Report:
    """Check the end state of `job_ids`; `expect` maps ids to "acked" or "dead" when the
    scenario knows each job's fate, `drained` says no job may still be live."""
    faults = list(faults)
    ids = sorted(set(job_ids))
    live, dead, runs, acks = _load(ids)
    figures = Figures(jobs=len(ids), faults=len(faults))
    problems: list[str] = []
    acks_may_vanish = any(f.kind in DATABASE_FAULTS for f in faults)
    causes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()

    for job_id in ids:
        job_runs = runs.get(job_id, [])
        job_acks = acks.get(job_id, [])
        figures.executions += len(job_runs)
        figures.duplicates += max(len(job_runs) - 1, 0)
        figures.handler_faults += sum(
            r.outcome in ("failed", "exited", "blocked") for r in job_runs
        )
        state = _end_state(
            job_id, live, dead, job_runs, job_acks, acks_may_vanish, faults, figures, problems
        )
        if state == "dead":
            reasons[dead[job_id].reason] += 1
        if expect is not None and job_id in expect and state != expect[job_id]:
            problems.append(f"job {job_id}: expected {expect[job_id]}, ended {state}")
        hitting = [f for f in faults if not job_runs or f.hits(job_runs[0].queue)]
        _check_runs(job_id, job_runs, job_acks, hitting, figures, problems, causes)

    if drained and figures.live:
        problems.append(f"{figures.live} job(s) still live after the drain")
    figures.duplicate_causes = dict(sorted(causes.items()))
    figures.dead_reasons = dict(sorted(reasons.items()))
    return Report(figures, problems)


def _end_state(
    job_id: int,
    live: set[int],
    dead: dict[int, DeadLetter],
    runs: list[_Run],
    acks: list[AckLog],
    acks_may_vanish: bool,
    faults: list[Fault],
    figures: Figures,
    problems: list[str],
) -> str:
    completed = [r for r in runs if r.outcome == "completed"]
    acked_keys = {(a.attempt, a.claimed_at) for a in acks}
    figures.results_discarded += sum((r.attempt, r.claimed_at) not in acked_keys for r in completed)
    if len(acks) > 1:
        figures.double_acks += 1
        problems.append(
            f"job {job_id}: acked {len(acks)} times, attempts {[a.attempt for a in acks]}"
        )
    if job_id in live and job_id in dead:
        problems.append(f"job {job_id}: both live and dead")
    if job_id in live:
        figures.live += 1
        if acks:
            problems.append(f"job {job_id}: acked, yet still live")
        return "live"
    if job_id in dead:
        figures.dead += 1
        letter = dead[job_id]
        if not letter.reason:
            problems.append(f"job {job_id}: dead letter without a reason")
        if letter.reason == MAX_ATTEMPTS_EXCEEDED and letter.attempts != letter.max_attempts:
            problems.append(
                f"job {job_id}: {letter.reason!r} at attempts "
                f"{letter.attempts}/{letter.max_attempts}"
            )
        if acks:
            problems.append(f"job {job_id}: acked, yet dead-lettered")
        return "dead"
    if not completed and not acks:
        figures.lost += 1
        problems.append(f"job {job_id}: vanished (in neither table, no handler completed)")
        return "lost"
    figures.acked += 1
    if not acks:
        figures.acks_unrecorded += 1
        if not acks_may_vanish and not any(_struck(faults, r) for r in completed):
            problems.append(
                f"job {job_id}: gone with no confirmed ack; completed by "
                f"{[(r.attempt, r.worker) for r in completed]}"
            )
    for ack in acks:
        if (ack.attempt, ack.claimed_at) not in {(r.attempt, r.claimed_at) for r in completed}:
            problems.append(
                f"job {job_id}: acked at attempt {ack.attempt} by {ack.worker_id}, "
                "but no handler completed that claim"
            )
    return "acked"


def _check_runs(
    job_id: int,
    runs: list[_Run],
    acks: list[AckLog],
    faults: list[Fault],
    figures: Figures,
    problems: list[str],
    causes: Counter[str],
) -> None:
    attempts = [r.attempt for r in runs]
    repeated = [a for a, n in Counter(attempts).items() if n > 1]
    if repeated:
        figures.double_handouts += 1
        problems.append(
            f"job {job_id}: attempt(s) {repeated} handed out more than once: "
            f"{[(r.attempt, r.worker) for r in runs]}"
        )
    if attempts != sorted(attempts):
        problems.append(f"job {job_id}: attempts out of claim order: {attempts}")
    if acks:
        acked_at = min(a.attempt for a in acks)
        later = [r.attempt for r in runs if r.attempt > acked_at]
        if later:
            figures.ran_after_ack += 1
            problems.append(
                f"job {job_id}: ran again at attempt(s) {later} after its ack at attempt {acked_at}"
            )
    previous: _Run | None = None
    for run in runs:
        since = (previous.claimed_at or previous.started_at) if previous else None
        until = run.claimed_at or run.started_at
        skipped = run.attempt - (previous.attempt if previous else 0) - 1
        if skipped > 0 and not _fault_between(faults, None, since, until):
            figures.unexplained += 1
            problems.append(
                f"job {job_id}: {skipped} claim(s) before attempt {run.attempt} "
                "never reached a handler, with no fault to explain it"
            )
        if previous is not None:
            cause = SELF_EXPLAINED.get(previous.outcome)
            if cause is None:
                fault = _fault_between(faults, previous.worker, since, until)
                cause = fault.kind if fault else None
            if cause is None:
                figures.unexplained += 1
                problems.append(
                    f"job {job_id}: attempt {run.attempt} on {run.worker} follows attempt "
                    f"{previous.attempt} on {previous.worker} (outcome "
                    f"{previous.outcome or 'cut short'!r}) with no fault, retry or exit to "
                    "explain it"
                )
            else:
                causes[cause] += 1
        previous = run


def _struck(faults: list[Fault], run: _Run) -> bool:
    """Whether a fault hit the worker of `run` after it started (a kill between the ack's
    commit and the ack record's write loses the record, not the ack)."""
    return any(
        f.workers is not None and run.worker in f.workers and f.ended >= run.started_at
        for f in faults
    )


def _fault_between(
    faults: list[Fault], worker: str | None, since: datetime | None, until: datetime
) -> Fault | None:
    """The latest fault that hit `worker` (any worker when None) between the two claims."""
    start = since or datetime.min.replace(tzinfo=until.tzinfo)
    hits = [
        fault
        for fault in faults
        if (fault.started <= until and fault.ended >= start)
        if worker is None or fault.covers(worker, start, until)
    ]
    return max(hits, key=lambda f: f.started, default=None)
