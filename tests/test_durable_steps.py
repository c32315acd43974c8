"""Durable steps (docs/durable-steps.md): `job.step(name, fn, *args, **kwargs)` runs fn once
per job, ever. In-process tests drive the steps of claimed jobs on the real database; the
worker tests run real `alk_worker` subprocesses and read the handlers' own records."""

from __future__ import annotations

import importlib
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from django_alkqueue import Cancelled, InvalidOption, PayloadError, job_actions, operations, queue
from django_alkqueue.consumers import registry
from django_alkqueue.models import DeadLetter, FinishedJob, JobStep, QueueMessage
from django_alkqueue.queues import JobHandle, ack_handles
from django_alkqueue.running import Run, RunningJob, running_job
from django_alkqueue.steps import IN_ATOMIC, IN_BATCH, MAX_NAME_CHARS
from django_alkqueue.testing import drain
from django_alkqueue.worker.history_sweeper import HistoryService
from django_alkqueue.worker.step_records import ClaimedSteps
from testproject.shop.models import HandlerRun
from tests.clocks import FakeClock
from tests.conftest import fill_ten_queues, wait_until
from tests.workers import Watched, run_worker, start_worker

pytestmark = pytest.mark.django_db(transaction=True)

CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.step_consumers"}


@pytest.fixture(autouse=True)
def step_consumers() -> Iterator[None]:
    import tests.step_consumers

    importlib.reload(tests.step_consumers)
    yield
    for name in tests.step_consumers.QUEUES:
        registry.unregister(name)


def notes(job_id: int) -> list[str]:
    return list(
        HandlerRun.objects.filter(job_id=job_id).order_by("id").values_list("note", flat=True)
    )


def steps_of(job_id: int) -> dict[str, tuple[Any, int]]:
    rows = JobStep.objects.filter(job_id=job_id).values_list("name", "value", "attempt")
    return {name: (value, attempt) for name, value, attempt in rows}


def claimed(name: str = "in-process", clock: Any = None) -> tuple[JobHandle, RunningJob]:
    """A job claimed in this process, and the `job` its handler would get."""
    q = queue(name, lease=60) if clock is None else queue(name, lease=60, clock=clock)
    q.enqueue({"n": 1})
    (handle,) = q.claim("tests:1")
    run = Run()
    run.steps = ClaimedSteps("default", handle.claim, q.clock)
    return handle, running_job(handle.job, run)


class Calls:
    """A step function that counts its calls."""

    def __init__(self, value: Any = None) -> None:
        self.count = 0
        self.value = value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.value if self.value is not None else {"args": list(args), "kwargs": kwargs}


# -- the step, in process --------------------------------------------------------------------


def test_a_step_calls_fn_with_its_arguments_records_the_value_and_returns_it():
    handle, job = claimed()
    fn = Calls()

    value = job.step("charge", fn, 1, "a", key=[2])

    assert value == {"args": [1, "a"], "kwargs": {"key": [2]}}
    assert fn.count == 1
    assert steps_of(handle.job.id) == {"charge": (value, 1)}


def test_a_later_run_of_the_same_job_gets_the_recorded_value_without_calling_fn():
    handle, job = claimed()
    job.step("charge", Calls({"id": "ch_1"}))
    again = Run()
    again.steps = ClaimedSteps("default", handle.claim, handle.queue.clock)
    later = running_job(handle.job, again)
    fn = Calls({"id": "ch_2"})

    assert later.step("charge", fn) == {"id": "ch_1"}
    assert fn.count == 0


def test_a_value_is_held_to_the_payloads_rules_a_tuple_is_refused_as_there():
    handle, job = claimed()

    with pytest.raises(PayloadError, match="tuple"):
        job.step("pair", lambda: (1, 2))
    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


@pytest.mark.parametrize(
    "name", ["", "x" * (MAX_NAME_CHARS + 1), "a\x00b", 7, None, b"bytes", "a\ud800"],
    ids=["empty", "too-long", "nul", "int", "none", "bytes", "surrogate"],
)  # fmt: skip
def test_a_bad_name_is_invalid_and_fn_is_not_called(name: Any):
    handle, job = claimed()
    fn = Calls()

    with pytest.raises(InvalidOption):
        job.step(name, fn)

    assert fn.count == 0
    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


def test_a_name_of_200_characters_is_accepted_and_so_is_one_beyond_ascii():
    _, job = claimed()

    assert job.step("x" * MAX_NAME_CHARS, Calls(5)) == 5
    assert job.step("é" * MAX_NAME_CHARS, Calls(6)) == 6


def test_a_name_used_twice_in_one_run_is_invalid_the_second_time():
    _, job = claimed()
    job.step("part", Calls(1))
    fn = Calls(2)

    with pytest.raises(InvalidOption, match="used twice"):
        job.step("part", fn)
    assert fn.count == 0


def test_a_value_that_is_not_json_is_a_payload_error_and_nothing_is_recorded():
    handle, job = claimed()

    with pytest.raises(PayloadError):
        job.step("odd", lambda: {1, 2})
    with pytest.raises(PayloadError):
        job.step("nan", lambda: float("nan"))

    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


def test_a_value_over_max_payload_bytes_is_a_payload_error_and_nothing_is_recorded():
    handle, job = claimed()

    with (
        override_settings(ALKQUEUE={"MAX_PAYLOAD_BYTES": 100}),
        pytest.raises(PayloadError, match="MAX_PAYLOAD_BYTES"),
    ):
        job.step("big", lambda: "x" * 200)

    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


def test_an_exception_from_fn_propagates_and_nothing_is_recorded():
    handle, job = claimed()

    def broken() -> None:
        raise ValueError("card declined")

    with pytest.raises(ValueError, match="card declined"):
        job.step("charge", broken)
    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


def test_a_stale_claims_record_is_refused_while_another_claim_holds_the_job():
    clock = FakeClock()
    handle, stale = claimed("stale-steps", clock)
    stale.step("s1", Calls(1))
    clock.advance(120)  # the lease lapsed: reclaimed, then claimed again
    operations.reclaim("default", clock())
    (fresh,) = queue("stale-steps", lease=60, clock=clock).claim("tests:2")
    fn = Calls(2)

    with pytest.raises(Cancelled, match="claim lost"):
        stale.step("s2", fn)

    assert fn.count == 1  # it ran: only its record is refused
    assert stale.cancelled
    assert set(steps_of(handle.job.id)) == {"s1"}
    run = Run()
    run.steps = ClaimedSteps("default", fresh.claim, clock)
    assert running_job(fresh.job, run).step("s2", Calls(3)) == 3
    assert steps_of(handle.job.id)["s2"] == (3, 2)


def test_a_step_inside_transaction_atomic_is_invalid_before_fn_runs():
    _, job = claimed()
    fn = Calls()

    with transaction.atomic(), pytest.raises(InvalidOption, match=r"transaction\.atomic"):
        job.step("s1", fn)
    assert fn.count == 0


@pytest.mark.parametrize("steps", [IN_ATOMIC, IN_BATCH], ids=["atomic", "batch"])
def test_steps_in_atomic_and_batch_consumers_are_refused_before_fn_runs(steps: Any):
    handle, _ = claimed()
    run = Run()
    run.steps = steps
    fn = Calls()

    with pytest.raises(InvalidOption, match="cannot run in"):
        running_job(handle.job, run).step("s1", fn)
    assert fn.count == 0


def test_a_job_no_worker_runs_refuses_steps():
    handle, _ = claimed()

    with pytest.raises(InvalidOption, match="only in a handler a worker calls"):
        running_job(handle.job, Run()).step("s1", Calls())


@pytest.mark.django_db  # in the test's own transaction, as a TestCase's tests are
def test_drain_in_a_tests_transaction_runs_steps_and_a_retry_skips_the_recorded_one():
    job = queue("retrying-steps").enqueue({})

    drained = drain("retrying-steps")

    assert (drained.retried, drained.succeeded) == (1, 1)
    assert notes(job.id) == ["ran s1", "ran s2"]
    assert not JobStep.objects.filter(job_id=job.id).exists()


# -- what the ack and the sweep do with them -------------------------------------------------


def test_the_ack_of_a_job_with_steps_deletes_them_in_its_transaction():
    handle, job = claimed()
    job.step("s1", Calls(1))
    handle.with_steps = True

    assert ack_handles([handle], "default") == {handle.claim}
    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


class Statements:
    """The SQL this process sends through Django's cursors meanwhile."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.seen.append(sql)
        return execute(sql, params, many, context)

    def touching_steps(self) -> list[str]:
        return [sql for sql in self.seen if "alkqueue_jobstep" in sql]


def test_the_claim_and_ack_of_a_job_without_steps_never_touch_the_steps_table():
    q = queue("no-steps")
    q.enqueue({})
    statements = Statements()

    with connection.execute_wrapper(statements):
        (handle,) = q.claim("tests:1")
        assert ack_handles([handle], "default") == {handle.claim}

    assert statements.touching_steps() == []


def test_the_ack_of_a_job_that_recorded_steps_deletes_them_in_a_statement_of_its_own():
    handle, job = claimed()
    job.step("s1", Calls(1))
    handle.with_steps = True
    statements = Statements()

    with connection.execute_wrapper(statements):
        ack_handles([handle], "default")

    assert [sql.split()[0] for sql in statements.touching_steps()] == ["DELETE"]


def test_a_queue_that_keeps_history_keeps_the_steps_with_the_kept_job():
    @__import__("django_alkqueue").consumer("kept-steps", keep=timedelta(days=1))
    def kept(payload: Any, job: Any) -> None: ...

    try:
        handle, job = claimed("kept-steps")
        job.step("s1", Calls(1))
        handle.with_steps = True
        handle.record(None, 0.1)

        assert ack_handles([handle], "default") == {handle.claim}
        assert FinishedJob.objects.filter(job_id=handle.job.id).exists()
        assert operations.sweep_steps("default", 100) == 0
        assert set(steps_of(handle.job.id)) == {"s1"}
    finally:
        registry.unregister("kept-steps")


def test_the_sweep_deletes_the_steps_of_jobs_gone_and_keeps_those_of_live_and_dead_jobs():
    gone, gone_job = claimed("swept")
    gone_job.step("s1", Calls(1))
    live, live_job = claimed("swept")
    live_job.step("s1", Calls(1))
    dead, dead_job = claimed("swept")
    dead_job.step("s1", Calls(1))
    assert dead.fail("on purpose")
    assert queue("swept").cancel(gone.job.id)

    assert operations.sweep_steps("default", 100) == 1

    assert not JobStep.objects.filter(job_id=gone.job.id).exists()
    assert JobStep.objects.filter(job_id=live.job.id).exists()
    assert JobStep.objects.filter(job_id=dead.job.id).exists()


def test_the_leaders_history_sweep_deletes_the_steps_of_a_cancelled_job():
    handle, job = claimed("swept")
    job.step("s1", Calls(1))
    assert queue("swept").cancel(handle.job.id)

    HistoryService("default").run_once(queue("swept").clock())

    assert not JobStep.objects.filter(job_id=handle.job.id).exists()


@pytest.mark.postgres_only
def test_the_record_finds_its_job_by_an_index_and_the_load_by_the_steps_index():
    import uuid

    from django_alkqueue.sql.postgresql.statements import RECORD_STEP

    with connection.cursor() as cursor:
        fill_ten_queues(cursor)
        cursor.execute(
            "INSERT INTO alkqueue_jobstep (job_id, name, value, recorded_at, attempt, duration) "
            "SELECT i, 's' || (i % 4), 'null', now(), 1, 0.1 FROM generate_series(1, 20000) i"
        )
        cursor.execute("ANALYZE alkqueue_jobstep")
        now = queue("q").clock()
        cursor.execute("EXPLAIN " + RECORD_STEP, ["s", "null", now, 0.1, 5, uuid.uuid4(), now])
        record = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("EXPLAIN SELECT name, value FROM alkqueue_jobstep WHERE job_id = %s", [5])
        load = "\n".join(row[0] for row in cursor.fetchall())
    # By its primary key, or by alkqueue_lease_idx where few rows are claimed (here none).
    assert "Index Scan" in record and "Seq Scan" not in record, record
    assert "alkqueue_jobstep_name" in load and "Seq Scan" not in load, load


# -- real workers ----------------------------------------------------------------------------


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_killed_after_step_2_of_4_resumes_at_step_3(pool: str):
    job = queue("four-steps").enqueue({"hang_after": 2})
    worker = Watched(start_worker("--queue", "four-steps", "--pool", pool, env=CONSUMERS))
    try:
        wait_until(lambda: "hanging after s2" in notes(job.id), timeout=60,
                   what=f"step 2 recorded\n{worker.output}")  # fmt: skip
        assert set(steps_of(job.id)) == {"s1", "s2"}
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.process.wait(10)
    wait_until(lambda: QueueMessage.objects.filter(id=job.id, lease_expires_at__lt=queue(
        "four-steps").clock()).exists(), timeout=10, what="the lease lapses")  # fmt: skip
    operations.reclaim("default", queue("four-steps").clock())

    run_worker("--queue", "four-steps", "--pool", pool, "--burst", env=CONSUMERS)

    ran = [n for n in notes(job.id) if n.startswith("ran ")]
    assert ran == ["ran s1", "ran s2", "ran s3", "ran s4"]  # each step's function once
    assert notes(job.id)[-1] == "done: s1,s2,s3,s4"
    assert not QueueMessage.objects.filter(id=job.id).exists()
    assert not JobStep.objects.filter(job_id=job.id).exists()  # deleted with its ack


def _freeze_holding_no_write_lock(pid: int) -> None:
    """SIGSTOP a worker at a moment it holds no write lock. SQLite locks the whole database
    for a writer: a worker frozen inside a write would lock out every other process (the
    other engines lock rows). Elsewhere the first stop holds."""
    for _ in range(100):
        os.killpg(pid, signal.SIGSTOP)
        if connection.vendor != "sqlite" or _sqlite_writable():
            return
        os.killpg(pid, signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError("the worker held SQLite's write lock at every try")


def _sqlite_writable() -> bool:
    probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.2)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.rollback()
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        probe.close()


def test_a_stale_workers_step_is_refused_while_another_worker_holds_the_claim(tmp_path: Path):
    go = tmp_path / "go"
    job = queue("waiting-steps").enqueue({"go": str(go)})
    first = Watched(start_worker("--queue", "waiting-steps", env=CONSUMERS))
    second = None
    try:
        wait_until(lambda: any(n.startswith("waiting") for n in notes(job.id)), timeout=60,
                   what=f"the first worker waits\n{first.output}")  # fmt: skip
        _freeze_holding_no_write_lock(first.pid)  # frozen: its lease lapses, no longer extended
        wait_until(lambda: QueueMessage.objects.filter(id=job.id, lease_expires_at__lt=queue(
            "waiting-steps").clock()).exists(), timeout=10, what="the lease lapses")  # fmt: skip
        operations.reclaim("default", queue("waiting-steps").clock())
        second = Watched(start_worker("--queue", "waiting-steps", env=CONSUMERS))
        wait_until(lambda: sum(n.startswith("waiting") for n in notes(job.id)) == 2,
                   timeout=60, what=f"the second worker waits\n{second.output}")  # fmt: skip
        go.touch()
        os.killpg(first.pid, signal.SIGCONT)
        wait_until(lambda: "done" in notes(job.id), timeout=60,
                   what=f"the second worker finishes\n{second.output}")  # fmt: skip
        wait_until(lambda: any(n.startswith("s2 refused") for n in notes(job.id)), timeout=30,
                   what=f"the stale step refused\n{first.output}")  # fmt: skip
    finally:
        for worker in (first, second):
            if worker is not None:
                os.killpg(worker.pid, signal.SIGCONT)
                os.killpg(worker.pid, signal.SIGKILL)
                worker.process.wait(10)
    refused = [n for n in notes(job.id) if n.startswith("s2 refused")]
    assert refused == ["s2 refused: Cancelled: claim lost"]
    # s1 ran once (the second worker found it); s2 ran in both, recorded by the second only.
    assert [n for n in notes(job.id) if n.startswith("ran ")].count("ran s1") == 1


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_requeued_dead_letter_resumes_after_its_last_recorded_step(pool: str):
    job = queue("fail-after-two").enqueue({})
    run_worker("--queue", "fail-after-two", "--pool", pool, "--burst", env=CONSUMERS)
    assert DeadLetter.objects.filter(job_id=job.id).exists()
    assert set(steps_of(job.id)) == {"s1", "s2"}  # a dead letter keeps its steps

    assert queue("fail-after-two").requeue(job.id) is not None
    run_worker("--queue", "fail-after-two", "--pool", pool, "--burst", env=CONSUMERS)

    assert [n for n in notes(job.id) if n.startswith("ran ")] == ["ran s1", "ran s2", "ran s3"]
    assert notes(job.id)[-1] == "done"
    assert not JobStep.objects.filter(job_id=job.id).exists()


def test_a_dead_letter_whose_third_step_failed_every_attempt_resumes_at_it_once_fixed(
    tmp_path: Path,
):
    fixed = tmp_path / "fixed"
    job = queue("third-fails").enqueue({"fixed": str(fixed)})
    run_worker("--queue", "third-fails", "--burst", env=CONSUMERS)
    assert DeadLetter.objects.filter(job_id=job.id).exists()
    assert notes(job.id) == ["ran s1", "ran s2", "s3 failed", "s3 failed"]

    fixed.touch()
    assert queue("third-fails").requeue(job.id) is not None
    run_worker("--queue", "third-fails", "--burst", env=CONSUMERS)

    assert notes(job.id)[4:] == ["ran s3", "done"]  # steps 1 and 2 not called again
    assert not JobStep.objects.filter(job_id=job.id).exists()


def test_a_requeue_from_step_2_runs_steps_2_and_3_again_and_step_1_not(tmp_path: Path):
    fixed = tmp_path / "fixed"
    job = queue("third-fails").enqueue({"fixed": str(fixed)})
    run_worker("--queue", "third-fails", "--burst", env=CONSUMERS)
    fixed.touch()

    done = job_actions.requeue_from_step("default", job.id, "s2", None, queue("q").clock())
    assert done.requeued and done.dropped == ["s2"]
    run_worker("--queue", "third-fails", "--burst", env=CONSUMERS)

    assert notes(job.id)[4:] == ["ran s2", "ran s3", "done"]


def test_the_history_keeps_the_steps_until_its_sweep_deletes_the_kept_job():
    @__import__("django_alkqueue").consumer("kept-steps", keep=timedelta(hours=1))
    def kept(payload: Any, job: Any) -> None: ...

    try:
        handle, job = claimed("kept-steps")
        now = queue("kept-steps").clock()
        job.step("s1", Calls(1))
        handle.with_steps = True
        handle.record(None, 0.1)
        assert ack_handles([handle], "default") == {handle.claim}

        HistoryService("default").run_once(now + timedelta(minutes=59))
        assert set(steps_of(handle.job.id)) == {"s1"}

        HistoryService("default").run_once(now + timedelta(days=2))
        assert not FinishedJob.objects.filter(job_id=handle.job.id).exists()
        assert not JobStep.objects.filter(job_id=handle.job.id).exists()
    finally:
        registry.unregister("kept-steps")


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_steps_are_refused_in_atomic_and_batch_consumers(pool: str):
    atomic = queue("atomic-steps").enqueue({})
    batch = queue("batch-steps").enqueue_many([{}, {}])

    run_worker("--queue", "atomic-steps", "--queue", "batch-steps", "--pool", pool, "--burst",
               env=CONSUMERS)  # fmt: skip

    for job in [atomic, *batch]:
        (note,) = notes(job.id)
        assert note.startswith("refused: job.step cannot run in a")
    assert "atomic consumer" in notes(atomic.id)[0]
    assert "batch consumer" in notes(batch[0].id)[0]
    assert not JobStep.objects.exists()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_an_async_handler_awaits_its_steps_and_a_retry_skips_the_recorded_one(pool: str):
    job = queue("async-steps").enqueue({})

    run_worker("--queue", "async-steps", "--pool", pool, "--burst", env=CONSUMERS)

    assert notes(job.id) == ["ran a1", "ran a2"]
    assert not QueueMessage.objects.filter(id=job.id).exists()
