"""A hypothesis state machine: random sequences of queue operations, run against the real API
and against a small in-memory model of the rules (docs/queues.md, issue 2); after every step
both must agree on every job, on the stats and on what each call returned.

The model is deliberately naive: a dict of job id -> `Rec`, and a few lines per rule. Ids come
from the real enqueue (the model cannot guess them); everything else the model works out.

`make test` runs 15 random sequences of 30 steps; STATE_MACHINE_FULL=1 (set by `make chaos`)
runs 50.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_alkqueue import queue
from django_alkqueue.jobs import Job
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.queues import JobHandle
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db

FULL = bool(os.environ.get("STATE_MACHINE_FULL"))

MAX = "max attempts exceeded"
FAILED = "failed"
EXPIRED = "expired"

# Two queues with different stamps, so that per-queue rules (lease, max_attempts, retention,
# claims and stats that see only their own queue) are exercised.
QUEUES: dict[str, dict[str, Any]] = {
    "alpha": {"lease": 10, "max_attempts": 2, "retention": 20},
    "beta": {"lease": 3, "max_attempts": 3, "retention": None},
}
WORKERS = ("w1", "w2")
# Large enough to mean "everything": a run never holds more jobs than it has steps.
ALL = 1000

queue_names = st.sampled_from(["alpha", "alpha", "alpha", "beta"])  # mostly one, to crowd it
errors = st.sampled_from([None, "boom", ""])
# Clock moves chosen to land on and next to the lease boundaries (10 s and 3 s).
seconds = st.sampled_from([0.000001, 1, 2.999999, 3, 5, 9.999999, 10, 30])
# One enqueue call's arguments.
job_specs = st.fixed_dictionaries(
    {
        "payload": st.integers(0, 99),
        "delay": st.sampled_from([None, 0, 3, 10]),
        "priority": st.sampled_from([None, -1, 0, 1]),
        "max_attempts": st.sampled_from([None, 1, 2, 3]),
        "expires": st.sampled_from([None, None, 5, 15, 60]),
        "unique_key": st.sampled_from([None, None, None, "k1", "k2"]),
    }
)


@dataclasses.dataclass
class Rec:
    """The model of one job, live or dead."""

    id: int
    queue: str
    payload: int
    priority: int
    max_attempts: int
    unique_key: str | None
    run_at: datetime
    enqueued_at: datetime
    expires_at: datetime | None
    attempts: int = 0
    token: int | None = None  # which claim holds it (the model's stand-in for the UUID)
    claimed_by: str | None = None
    lease_expires_at: datetime | None = None
    last_error: str | None = None
    dead: bool = False
    reason: str | None = None
    died_at: datetime | None = None
    requeued_at: datetime | None = None

    def state(self, now: datetime) -> str:
        if self.dead:
            return "dead"
        if self.token is not None:
            return "claimed"
        return "pending" if self.run_at <= now else "scheduled"

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def lapsed(self, now: datetime) -> bool:
        return (
            self.token is not None
            and self.lease_expires_at is not None
            and self.lease_expires_at <= now
        )

    def view(self, now: datetime) -> dict[str, Any]:
        return {f: getattr(self, f) for f in COMPARED} | {"state": self.state(now)}


# The fields of a real Job that the model predicts (plus its state).
COMPARED = [f.name for f in dataclasses.fields(Rec) if f.name not in ("token", "dead")]


def seen(job: Job) -> dict[str, Any]:
    return {f: getattr(job, f) for f in COMPARED} | {"state": job.state}


def agree(real: Job | None, model: Rec | None, now: datetime, what: str) -> None:
    if model is None:
        assert real is None, f"{what}: the model has no such job, the queue returned {real}"
        return
    assert real is not None, f"{what}: the queue returned None, the model has {model}"
    expected, got = model.view(now), seen(real)
    diff = {k: (got[k], expected[k]) for k in expected if got[k] != expected[k]}
    assert not diff, f"{what}: job {model.id} differs (field: (queue, model)): {diff}"


class QueueMachine(RuleBasedStateMachine):
    jobs = Bundle("jobs")
    handles = Bundle("handles")

    def __init__(self) -> None:
        super().__init__()
        QueueMessage.objects.all().delete()
        DeadLetter.objects.all().delete()
        self.clock = FakeClock()
        self.queues = {name: queue(name, clock=self.clock, **opts) for name, opts in QUEUES.items()}
        self.model: dict[int, Rec] = {}  # every job ever seen that still exists, live or dead
        self.gone: set[int] = set()  # acked, cancelled, or dead letters dropped by retention
        self.tokens = 0

    @property
    def now(self) -> datetime:
        return self.clock.now

    # -- model helpers ---------------------------------------------------------------------

    def live(self, name: str) -> list[Rec]:
        return [r for r in self.model.values() if r.queue == name and not r.dead]

    def valid(self, rec: Rec | None, token: int) -> bool:
        """The validity predicate: the row exists, carries this claim, and the lease holds."""
        return (
            rec is not None
            and not rec.dead
            and rec.token == token
            and rec.lease_expires_at is not None
            and rec.lease_expires_at > self.now
        )

    def dead_letter(self, rec: Rec, reason: str, error: str) -> None:
        rec.dead, rec.reason, rec.last_error, rec.died_at = True, reason, error, self.now
        rec.token, rec.lease_expires_at = None, None

    def forget(self, rec: Rec) -> None:
        del self.model[rec.id]
        self.gone.add(rec.id)

    # -- rules -----------------------------------------------------------------------------

    def _enqueue(self, name, payload, delay, priority, max_attempts, expires, unique_key):
        options = {
            "delay": delay,
            "priority": priority,
            "max_attempts": max_attempts,
            "expires": expires,
            "unique_key": unique_key,
        }
        job = self.queues[name].enqueue(payload, **options)
        holder = [r for r in self.live(name) if unique_key and r.unique_key == unique_key]
        if holder:  # a live job holds the key: nothing is written, that job comes back
            agree(job, holder[0], self.now, "enqueue with a held unique key")
            return job.id
        assert job.id not in self.model and job.id not in self.gone, f"id {job.id} reused"
        now = self.now
        rec = Rec(
            id=job.id,
            queue=name,
            payload=payload,
            priority=0 if priority is None else priority,
            max_attempts=QUEUES[name]["max_attempts"] if max_attempts is None else max_attempts,
            unique_key=unique_key,
            run_at=now + timedelta(seconds=delay or 0),
            enqueued_at=now,
            expires_at=None if expires is None else now + timedelta(seconds=expires),
        )
        self.model[rec.id] = rec
        agree(job, rec, now, "enqueue")
        return job.id

    @initialize(target=jobs, specs=st.lists(job_specs, max_size=5))
    def backlog(self, specs):
        return multiple(*(self._enqueue("alpha", **spec) for spec in specs))

    @rule(target=jobs, name=queue_names, specs=st.lists(job_specs, min_size=1, max_size=3))
    def enqueue(self, name, specs):
        return multiple(*(self._enqueue(name, **spec) for spec in specs))

    def model_claim(self, name: str, n: int) -> list[Rec]:
        """What a claim of n on `name` hands out now, best first; lapsed, spent claims die."""
        if n <= 0:
            return []
        now = self.now
        alive = [r for r in self.live(name) if not r.expired(now)]
        for r in alive:  # a lapsed claim with no attempts left dies when a claim meets it
            if r.lapsed(now) and r.attempts >= r.max_attempts:
                self.dead_letter(r, MAX, MAX)
        due = [
            r
            for r in alive
            if not r.dead and (r.lapsed(now) if r.token is not None else r.run_at <= now)
        ]
        return sorted(due, key=lambda r: (-r.priority, r.run_at, r.id))[:n]

    def handed_out(self, call: str, worker: str, got: list[JobHandle], expected: list[Rec]):
        got_ids, expected_ids = [h.job.id for h in got], [r.id for r in expected]
        assert got_ids == expected_ids, f"{call} handed out {got_ids}, model: {expected_ids}"
        out = []
        for handle, rec in zip(got, expected, strict=True):
            self.tokens += 1
            rec.attempts += 1
            rec.token, rec.claimed_by = self.tokens, worker
            rec.lease_expires_at = self.now + timedelta(seconds=QUEUES[rec.queue]["lease"])
            agree(handle.job, rec, self.now, call)
            out.append((handle, self.tokens))
        return multiple(*out)

    @rule(target=handles, name=queue_names, worker=st.sampled_from(WORKERS),
          n=st.sampled_from([-1, 0, 1, 2, 3, ALL]))  # fmt: skip
    def claim(self, name, worker, n):
        got = self.queues[name].claim(worker, n)
        return self.handed_out(f"{name}.claim({worker!r}, {n})", worker, got,
                               self.model_claim(name, n))  # fmt: skip

    @rule(target=handles, name=queue_names, worker=st.sampled_from(WORKERS))
    def claim_one(self, name, worker):
        got = self.queues[name].claim_one(worker)
        return self.handed_out(f"{name}.claim_one({worker!r})", worker,
                               [] if got is None else [got], self.model_claim(name, 1))  # fmt: skip

    @rule(handle=handles)
    def ack(self, handle):
        real, token = handle
        rec = self.model.get(real.job.id)
        expected = self.valid(rec, token)
        assert real.ack() is expected, f"ack of {real} should return {expected}"
        if expected:
            self.forget(rec)

    @rule(handle=handles, error=errors, delay=st.sampled_from([0, 5, 20]))
    def retry(self, handle, error, delay):
        real, token = handle
        rec = self.model.get(real.job.id)
        expected = self.valid(rec, token)
        assert real.retry(error, delay=delay) is expected, f"retry of {real}: not {expected}"
        if not expected:
            return
        if rec.attempts >= rec.max_attempts:
            self.dead_letter(rec, MAX, MAX if error is None else error)
        else:
            rec.token, rec.claimed_by, rec.lease_expires_at = None, None, None
            rec.run_at = self.now + timedelta(seconds=delay)
            if error is not None:
                rec.last_error = error

    @rule(handle=handles, error=errors)
    def fail(self, handle, error):
        real, token = handle
        rec = self.model.get(real.job.id)
        expected = self.valid(rec, token)
        assert real.fail(error) is expected, f"fail of {real} should return {expected}"
        if expected:
            self.dead_letter(rec, FAILED, FAILED if error is None else error)

    @rule(handle=handles, extend=st.sampled_from([None, 1, 5, 60]))
    def heartbeat(self, handle, extend):
        real, token = handle
        rec = self.model.get(real.job.id)
        expected = self.valid(rec, token)
        assert real.heartbeat(extend) is expected, f"heartbeat of {real}: not {expected}"
        if expected:
            seconds = QUEUES[rec.queue]["lease"] if extend is None else extend
            rec.lease_expires_at = self.now + timedelta(seconds=seconds)

    @rule(name=queue_names, picks=st.lists(st.integers(0, ALL), max_size=4))
    def ack_batch(self, name, picks):
        known = sorted([*self.model, *self.gone])
        chosen = [known[p % len(known)] for p in picks] if known else []
        done = [
            rec
            for rec in map(self.model.get, dict.fromkeys(chosen))
            if rec is not None
            and rec.queue == name
            and rec.token is not None
            and not rec.lapsed(self.now)
        ]
        assert self.queues[name].ack_batch(chosen) == len(done), f"{name}.ack_batch({chosen})"
        for rec in done:
            self.forget(rec)

    # get_job, cancel, requeue and ack_batch see only the queue they are called on.

    @rule(name=queue_names, job_id=jobs)
    def cancel(self, name, job_id):
        rec = self.model.get(job_id)
        expected = rec is not None and rec.queue == name and not rec.dead
        assert self.queues[name].cancel(job_id) is expected, f"{name}.cancel({job_id})"
        if expected:
            self.forget(rec)

    @rule(name=queue_names, job_id=jobs)
    def requeue(self, name, job_id):
        rec = self.model.get(job_id)
        job = self.queues[name].requeue(job_id)
        if rec is None or rec.queue != name or not rec.dead:
            assert job is None, f"{name}.requeue({job_id}) of no dead letter gave {job}"
            return
        key = rec.unique_key
        holder = [r for r in self.live(name) if key is not None and r.unique_key == key]
        if holder:  # a live job holds the key: it comes back, and the dead letter stays
            agree(job, holder[0], self.now, f"requeue({job_id}) onto a held unique key")
            return
        rec.dead, rec.reason, rec.died_at = False, None, None
        rec.attempts, rec.claimed_by = 0, None
        if rec.expires_at is not None:  # the same lifetime, counted from the last requeue
            rec.expires_at = self.now + (rec.expires_at - (rec.requeued_at or rec.enqueued_at))
        rec.run_at = rec.requeued_at = self.now  # enqueued_at stays the first enqueue's
        agree(job, rec, self.now, f"requeue({job_id})")

    @rule(name=queue_names)
    def sweep_expired(self, name):
        moved = [r for r in self.live(name) if r.expired(self.now)]
        for rec in moved:
            self.dead_letter(rec, EXPIRED, EXPIRED)
        retention = QUEUES[name]["retention"]
        if retention is not None:
            cutoff = self.now - timedelta(seconds=retention)
            for rec in [r for r in self.model.values() if r.queue == name and r.dead]:
                if rec.died_at < cutoff:
                    self.forget(rec)
        assert self.queues[name].sweep_expired() == len(moved), f"sweep_expired() on {name}"

    @rule(by=seconds)
    def advance(self, by):
        self.clock.advance(by)

    @rule(name=queue_names)
    def advance_by_a_lease(self, name):  # exactly: a lease that ends now has lapsed
        self.clock.advance(QUEUES[name]["lease"])

    @precondition(lambda self: self.clock.now.microsecond != 0)
    @rule()
    def advance_to_the_next_whole_second(self):
        self.clock.advance(microseconds=1_000_000 - self.clock.now.microsecond)

    # -- the check after every step -----------------------------------------------------------

    @invariant()
    def every_job_agrees(self):
        for name, q in self.queues.items():
            for job_id, rec in self.model.items():
                mine = rec if rec.queue == name else None
                agree(q.get_job(job_id), mine, self.now, f"{name}.get_job({job_id})")
            for job_id in self.gone:
                assert q.get_job(job_id) is None, f"{name}.get_job({job_id}) of a removed job"

    @invariant()
    def stats_agree(self):
        now = self.now
        for name, q in self.queues.items():
            live = self.live(name)
            pending = [r for r in live if r.state(now) == "pending"]
            oldest = max(((now - r.run_at).total_seconds() for r in pending), default=0.0)
            expected = (
                len(pending),
                sum(r.state(now) == "scheduled" for r in live),
                sum(r.state(now) == "claimed" for r in live),
                sum(r.dead for r in self.model.values() if r.queue == name),
                max(oldest, 0.0),
            )
            s = q.stats()
            got = (s.pending, s.scheduled, s.claimed, s.dead, s.oldest_pending_age)
            assert got == expected, f"stats() of {name}: {got} != model {expected}"
            assert q.depth() == len(live), f"depth() of {name}"
            assert q.depth_pending() == len(pending), f"depth_pending() of {name}"


@pytest.mark.slow
def test_queue_api_agrees_with_the_model(db):
    run_state_machine_as_test(
        QueueMachine,
        settings=settings(
            max_examples=50 if FULL else 15, stateful_step_count=30, deadline=None, database=None
        ),
    )
