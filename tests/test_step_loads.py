"""How a worker reads its jobs' recorded steps (docs/durable-steps.md, "How steps are read"):
the jobs of one claim read theirs in one statement, made when the first of them asks; a
handler without steps reads none; each job gets its own; a job whose claim was lost, or
lapsed, reads its own as before. In-process tests run the worker's executor on the real
database and count its statements; a worker test runs real `alk_worker` subprocesses."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_alkqueue import operations, queue
from django_alkqueue.consumers import registry
from django_alkqueue.models import JobStep, QueueMessage
from django_alkqueue.queues import JobHandle
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.worker.acker import AckService
from django_alkqueue.worker.executor import Executor
from django_alkqueue.worker.inflight import InFlight
from django_alkqueue.worker.served import resolve_specs
from testproject.shop.models import HandlerRun
from tests.clocks import FakeClock
from tests.conftest import fill_ten_queues
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)

CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.step_consumers"}
QUEUES = ("own-step", "async-own-step", "no-steps")


@pytest.fixture(autouse=True)
def step_consumers() -> Iterator[None]:
    import tests.step_consumers

    importlib.reload(tests.step_consumers)
    yield
    for name in tests.step_consumers.QUEUES:
        registry.unregister(name)


class Worker:
    """The worker's executor in this process: a claim's jobs held, told to the executor as
    the claimer tells it (Executor.claimed), then each run, their acks flushed."""

    def __init__(self) -> None:
        specs = {spec.queue: spec for spec in resolve_specs(QUEUES)}
        self.inflight = InFlight()
        stats = WorkerStats()
        self.acker = AckService("default", self.inflight, stats, window=0)
        self.executor = Executor(specs, self.acker, self.inflight, stats, "default")

    def hold(self, handles: list[JobHandle]) -> None:
        self.inflight.add_all(handles)
        self.executor.claimed(handles)

    def run(self, handles: list[JobHandle]) -> None:
        for handle in handles:
            self.executor.run(handle)
        while self.acker.pending():
            self.acker.flush()


@pytest.fixture
def worker() -> Iterator[Worker]:
    held = Worker()
    yield held
    held.executor.close()


def claim(name: str, count: int, clock: Any = None, recorded: bool = True) -> list[JobHandle]:
    """`count` jobs of `name` claimed in one claim; with `recorded`, each has a step "own"
    recorded already, naming its job."""
    q = queue(name, lease=60) if clock is None else queue(name, lease=60, clock=clock)
    jobs = q.enqueue_many([{"n": n} for n in range(count)])
    if recorded:
        JobStep.objects.bulk_create(
            JobStep(job_id=job.id, name="own", value={"job": job.id},
                    recorded_at=timezone.now(), attempt=1, duration=0.0)
            for job in jobs
        )  # fmt: skip
    handles = q.claim("tests:1", count)
    assert len(handles) == count
    return handles


def step_reads(queries: list[dict[str, Any]]) -> list[str]:
    """The statements that read recorded steps (not those recording or deleting them)."""
    writes = ("INSERT INTO alkqueue_jobstep", "DELETE FROM alkqueue_jobstep")
    return [
        q["sql"] for q in queries
        if "alkqueue_jobstep" in q["sql"] and not {"INSERT", "DELETE"} & set(q["sql"].split())
        and not any(w in q["sql"] for w in writes)  # a hot statement's logged text
    ]  # fmt: skip


def notes_of(ids: list[int]) -> dict[int, list[str]]:
    """Each job's notes (HandlerRun), in the order they were written."""
    found: dict[int, list[str]] = {job_id: [] for job_id in ids}
    rows = HandlerRun.objects.filter(job_id__in=ids).order_by("id")
    for job_id, note in rows.values_list("job_id", "note"):
        found[job_id].append(note)
    return found


def notes(handles: list[JobHandle]) -> dict[int, list[str]]:
    return notes_of([handle.job.id for handle in handles])


def got_own(handles: list[JobHandle]) -> dict[int, list[str]]:
    return {handle.job.id: [f"got {handle.job.id}"] for handle in handles}


def test_a_claim_of_several_step_using_jobs_reads_their_steps_in_one_statement(worker):
    handles = claim("own-step", 5)
    worker.hold(handles)

    with CaptureQueriesContext(connection) as captured:
        worker.run(handles)

    assert len(step_reads(captured.captured_queries)) == 1, captured.captured_queries
    assert notes(handles) == got_own(handles)


def test_each_job_of_a_claim_gets_its_own_steps_and_records_its_own(worker):
    handles = claim("own-step", 3, recorded=False)
    worker.hold(handles)

    with CaptureQueriesContext(connection) as captured:
        worker.run(handles)

    assert len(step_reads(captured.captured_queries)) == 1
    assert notes(handles) == {h.job.id: ["ran own", f"got {h.job.id}"] for h in handles}


def test_a_handler_without_steps_reads_no_steps(worker):
    handles = claim("no-steps", 4, recorded=False)
    worker.hold(handles)

    with CaptureQueriesContext(connection) as captured:
        worker.run(handles)

    assert step_reads(captured.captured_queries) == []
    assert notes(handles) == {handle.job.id: ["ran"] for handle in handles}


def test_a_job_whose_claim_was_lost_before_the_read_reads_its_own_as_before(worker):
    _, lost, _ = handles = claim("own-step", 3)
    worker.hold(handles)
    # Reclaimed by another worker: the claim's read leaves it out.
    QueueMessage.objects.filter(id=lost.job.id).update(claim_token=uuid.uuid4())

    with CaptureQueriesContext(connection) as captured:
        worker.run(handles)

    assert len(step_reads(captured.captured_queries)) == 2  # the claim's, then its own
    assert notes(handles) == got_own(handles)  # it found its recorded step, as before
    assert QueueMessage.objects.filter(id=lost.job.id).exists()  # its ack was refused


def test_a_job_asking_once_its_lease_lapsed_reads_its_own_again(worker):
    clock = FakeClock()
    first, late = handles = claim("own-step", 2, clock=clock)
    worker.hold(handles)
    worker.run([first])
    clock.advance(61)

    with CaptureQueriesContext(connection) as captured:
        worker.run([late])

    assert len(step_reads(captured.captured_queries)) == 1  # its own, not the claim's
    assert notes([late]) == got_own([late])


def test_a_job_whose_lease_was_extended_still_gets_the_claims_read(worker):
    clock = FakeClock()
    first, late = handles = claim("own-step", 2, clock=clock)
    worker.hold(handles)
    worker.run([first])
    clock.advance(50)
    assert late.heartbeat()
    clock.advance(20)  # past the lease it was claimed with, within the extended one

    with CaptureQueriesContext(connection) as captured:
        worker.run([late])

    assert step_reads(captured.captured_queries) == []
    assert notes([late]) == got_own([late])


def counted(calls: list[str], name: str, function: Any) -> Any:
    def call(*args: Any) -> Any:
        calls.append(name)
        return function(*args)

    return call


def test_async_handlers_of_one_claim_read_their_steps_once(worker, monkeypatch):
    # Their reads run in asgiref's thread, on its connection: counted by the calls.
    reads: list[str] = []
    for name in ("load_steps", "load_claimed_steps"):
        monkeypatch.setattr(operations, name, counted(reads, name, getattr(operations, name)))
    handles = claim("async-own-step", 3)
    worker.hold(handles)

    worker.run(handles)

    assert reads == ["load_claimed_steps"]
    assert notes(handles) == got_own(handles)


def test_a_process_pool_child_reads_the_steps_of_its_one_job():
    q = queue("own-step")
    jobs = q.enqueue_many([{"n": n} for n in range(3)])

    run_worker("--queue", "own-step", "--pool", "process", "--burst", env=CONSUMERS)

    assert notes_of([job.id for job in jobs]) == {
        job.id: ["ran own", f"got {job.id}"] for job in jobs
    }


def test_a_worker_hands_each_job_of_its_claims_its_own_recorded_steps():
    jobs = queue("own-step").enqueue_many([{"n": n} for n in range(20)])
    JobStep.objects.bulk_create(
        JobStep(job_id=job.id, name="own", value={"job": job.id},
                recorded_at=timezone.now(), attempt=1, duration=0.0)
        for job in jobs
    )  # fmt: skip

    run_worker("--queue", "own-step", "--concurrency", "4", "--burst", env=CONSUMERS)

    assert notes_of([job.id for job in jobs]) == {job.id: [f"got {job.id}"] for job in jobs}


@pytest.mark.postgres_only
def test_the_claims_read_finds_its_jobs_by_key_and_their_steps_by_the_steps_index():
    from django_alkqueue.sql.postgresql.session import PINNED_PLAN_SETTINGS
    from django_alkqueue.sql.postgresql.statements import LOAD_CLAIMED_STEPS

    with connection.cursor() as cursor:
        fill_ten_queues(cursor)
        cursor.execute(
            "INSERT INTO alkqueue_jobstep (job_id, name, value, recorded_at, attempt, duration) "
            "SELECT i, 's' || (i % 4), 'null', now(), 1, 0.1 FROM generate_series(1, 20000) i"
        )
        cursor.execute("ANALYZE alkqueue_jobstep")
        for name, value in PINNED_PLAN_SETTINGS.items():  # as the statement runs
            cursor.execute(f"SET {name} = {value}")
        params = ["{5,6,7}", "{" + str(uuid.uuid4()) + "}", queue("q").clock()]
        cursor.execute("EXPLAIN " + LOAD_CLAIMED_STEPS, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET ALL")
    # The jobs by their primary key, or by alkqueue_lease_idx where few rows are claimed.
    assert "alkqueue_message_pkey" in plan or "alkqueue_lease_idx" in plan, plan
    assert "alkqueue_jobstep_name" in plan and "Seq Scan" not in plan, plan


@pytest.mark.postgres_only
def test_the_acks_delete_of_steps_and_signals_walks_their_indexes():
    from django_alkqueue.sql.postgresql.statements import DELETE_SIGNALS_OF, DELETE_STEPS_OF

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO alkqueue_jobstep (job_id, name, value, recorded_at, attempt, duration) "
            "SELECT i, 's' || (i % 4), 'null', now(), 1, 0.1 FROM generate_series(1, 20000) i"
        )
        cursor.execute(
            "INSERT INTO alkqueue_jobsignal (job_id, name, payload, sent_at) "
            "SELECT i, 'go', 'null', now() FROM generate_series(1, 20000) i"
        )
        cursor.execute("ANALYZE alkqueue_jobstep")
        cursor.execute("ANALYZE alkqueue_jobsignal")
        plans = []
        for statement in (DELETE_STEPS_OF, DELETE_SIGNALS_OF):
            cursor.execute("EXPLAIN " + statement, ["{5,6,7}"])
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    steps, signals = plans
    assert "alkqueue_jobstep_name" in steps and "Seq Scan" not in steps, steps
    assert "alkqueue_jobsignal_name" in signals and "Seq Scan" not in signals, signals


def test_an_ack_deletes_the_steps_of_many_jobs_and_no_others(worker):
    handles = claim("own-step", 30)
    other = queue("own-step").enqueue({"n": "other"})
    JobStep.objects.create(job_id=other.id, name="own", value={"job": other.id},
                           recorded_at=timezone.now(), attempt=1, duration=0.0)  # fmt: skip
    worker.hold(handles)

    worker.run(handles)

    assert list(JobStep.objects.values_list("job_id", flat=True)) == [other.id]
