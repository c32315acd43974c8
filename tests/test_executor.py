"""The executor: a handler's outcome becomes ack, retry or fail. Run in-process, no threads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_alkqueue import Fail, Retry, RetryPolicy
from django_alkqueue.consumers import ConsumerSpec
from django_alkqueue.jobs import Job
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.signals import job_dead_lettered, job_retried, job_started, job_succeeded
from django_alkqueue.worker.acker import AckService
from django_alkqueue.worker.executor import Executor
from django_alkqueue.worker.heartbeats import HeartbeatService
from django_alkqueue.worker.inflight import InFlight
from testproject.shop.models import LedgerEntry

pytestmark = pytest.mark.django_db


class Harness:
    """A worker's executor pieces, with `run(handle)` or `run_unit(handles)` driven by the
    test."""

    def __init__(self, handler, **spec_options):
        self.inflight = InFlight()
        self.stats = WorkerStats()
        self.acker = AckService("default", self.inflight, self.stats, window=0)
        spec = ConsumerSpec(
            queue="work", handler=handler, path="tests.handler", lease=None, max_attempts=None,
            retry=spec_options.pop("retry", RetryPolicy(backoff="constant", base=10,
                                                        jitter=False)),
            atomic=spec_options.pop("atomic", False), batch=spec_options.pop("batch", None),
        )  # fmt: skip
        self.executor = Executor({"work": spec}, self.acker, self.inflight, self.stats, "default")

    def run(self, handle):
        self.inflight.add(handle)
        self.executor.run(handle)
        self.acker.flush()
        return handle

    def run_unit(self, handles):
        """The jobs of one claim as the worker runs them: held, run as one unit, acked."""
        self.inflight.add_all(handles)
        self.executor.run_unit(handles)
        self.acker.flush()
        return handles


@pytest.fixture
def work(make_queue):
    return make_queue("work", max_attempts=3)


@pytest.fixture
def events():
    seen: list[tuple[str, int]] = []
    receivers = {}
    for name, signal in [("started", job_started), ("succeeded", job_succeeded),
                         ("retried", job_retried), ("dead", job_dead_lettered)]:  # fmt: skip

        def receiver(sender, job, _name=name, **kwargs):
            seen.append((_name, job.id))

        receivers[name] = receiver
        signal.connect(receiver)
    yield seen
    for name, signal in [("started", job_started), ("succeeded", job_succeeded),
                         ("retried", job_retried), ("dead", job_dead_lettered)]:  # fmt: skip
        signal.disconnect(receivers[name])


def test_a_handler_that_returns_acks_the_job(work, events):
    seen_payloads = []
    harness = Harness(lambda payload, job: seen_payloads.append((payload, job.attempts)))
    job = work.enqueue({"x": 1})
    harness.run(work.claim_one("w"))
    assert seen_payloads == [({"x": 1}, 1)]
    assert work.get_job(job.id) is None
    assert events == [("started", job.id), ("succeeded", job.id)]
    assert harness.inflight.count() == 0
    assert harness.stats.snapshot()["work"]["succeeded"] == 1


def test_an_exception_retries_on_the_policy_curve_with_class_message_and_traceback(work, clock):
    def handler(payload, job):
        raise ConnectionError("smtp down")

    job = work.enqueue(1)
    Harness(handler).run(work.claim_one("w"))
    stored = work.get_job(job.id)
    assert stored.state == "scheduled"
    assert stored.run_at == clock.now + timedelta(seconds=10)
    assert stored.last_error.startswith("ConnectionError: smtp down")
    assert "Traceback (most recent call last)" in stored.last_error
    assert 'raise ConnectionError("smtp down")' in stored.last_error


def test_an_exception_on_the_last_attempt_dead_letters_with_the_error(work, clock, events):
    def handler(payload, job):
        raise ValueError(f"bad on attempt {job.attempts}")

    harness = Harness(handler)
    job = work.enqueue(1)
    for _ in range(3):
        harness.run(work.claim_one("w"))
        clock.advance(10)
    dead = work.get_job(job.id)
    assert (dead.state, dead.reason, dead.attempts) == ("dead", "max attempts exceeded", 3)
    assert dead.last_error.startswith("ValueError: bad on attempt 3")
    assert [e for e in events if e[0] == "dead"] == [("dead", job.id)]
    assert [e for e in events if e[0] == "retried"] == [("retried", job.id)] * 2


def test_retry_with_a_delay_is_honoured(work, clock):
    def handler(payload, job):
        raise Retry(delay=timedelta(minutes=3))

    job = work.enqueue(1)
    Harness(handler).run(work.claim_one("w"))
    assert work.get_job(job.id).run_at == clock.now + timedelta(minutes=3)


def test_retry_without_a_delay_uses_the_policy(work, clock):
    def handler(payload, job):
        raise Retry()

    job = work.enqueue(1)
    Harness(handler).run(work.claim_one("w"))
    assert work.get_job(job.id).run_at == clock.now + timedelta(seconds=10)


def test_fail_dead_letters_at_once_with_its_reason(work):
    def handler(payload, job):
        raise Fail("address does not exist")

    job = work.enqueue(1)
    Harness(handler).run(work.claim_one("w"))
    dead = work.get_job(job.id)
    assert (dead.state, dead.attempts, dead.last_error) == ("dead", 1, "address does not exist")
    assert dead.reason == "failed"


def test_an_exception_outside_retry_on_dead_letters_at_once(work):
    def handler(payload, job):
        raise KeyError("template")

    job = work.enqueue(1)
    Harness(handler, retry=RetryPolicy(retry_on=(TimeoutError,))).run(work.claim_one("w"))
    dead = work.get_job(job.id)
    assert (dead.state, dead.attempts) == ("dead", 1)
    assert dead.last_error.startswith("KeyError: 'template'")


def test_a_result_after_the_lease_was_lost_is_discarded(work, clock):
    def handler(payload, job):
        clock.advance(31)  # the lease lapses while the handler runs

    job = work.enqueue(1)
    harness = Harness(handler)
    harness.run(work.claim_one("w"))
    assert work.get_job(job.id).state == "claimed"  # not acked: reclaim will return it
    assert harness.stats.snapshot()["work"]["lost"] == 1


def _ledger_handler(fail_with=None, lapse=None):
    def handler(payload, job):
        LedgerEntry.objects.create(job_id=job.id, amount_cents=payload["amount"])
        if lapse is not None:
            lapse()
        if fail_with is not None:
            raise fail_with

    return handler


def test_an_atomic_handler_commits_its_writes_and_the_ack_together(work):
    job = work.enqueue({"amount": 500})
    Harness(_ledger_handler(), atomic=True).run(work.claim_one("w"))
    assert list(LedgerEntry.objects.values_list("job_id", "amount_cents")) == [(job.id, 500)]
    assert work.get_job(job.id) is None


def test_an_atomic_handler_that_raises_leaves_no_row_and_retries(work):
    job = work.enqueue({"amount": 500})
    Harness(_ledger_handler(fail_with=RuntimeError("boom")), atomic=True).run(work.claim_one("w"))
    assert LedgerEntry.objects.count() == 0
    stored = work.get_job(job.id)
    assert (stored.state, stored.attempts) == ("scheduled", 1)
    assert stored.last_error.startswith("RuntimeError: boom")


def test_an_atomic_handler_whose_lease_is_lost_before_commit_commits_neither(work, clock):
    job = work.enqueue({"amount": 500})
    harness = Harness(_ledger_handler(lapse=lambda: clock.advance(31)), atomic=True)
    harness.run(work.claim_one("w"))
    assert LedgerEntry.objects.count() == 0
    assert work.get_job(job.id).state == "claimed"  # still there for reclaim
    assert harness.stats.snapshot()["work"]["lost"] == 1


def test_an_atomic_handler_refuses_to_start_on_a_cancelled_job(work):
    job = work.enqueue({"amount": 1})
    handle = work.claim_one("w")
    work.cancel(job.id)
    Harness(_ledger_handler(), atomic=True).run(handle)
    assert LedgerEntry.objects.count() == 0


def test_handler_exceptions_never_escape_the_executor(work):
    def handler(payload, job):
        raise SystemError("deep trouble")

    job = work.enqueue(1)
    Harness(handler).run(work.claim_one("w"))  # no exception here
    assert work.get_job(job.id).state == "scheduled"


def test_acks_of_many_jobs_go_in_one_flush(work, django_assert_max_num_queries):
    harness = Harness(lambda payload, job: None)
    work.enqueue_many(range(20))
    handles = work.claim("w", 20)
    for handle in handles:
        harness.inflight.add(handle)
        harness.executor.run(handle)
    with django_assert_max_num_queries(3):
        assert harness.acker.flush() == 20
    assert work.depth() == 0


def test_one_flush_acking_a_job_claimed_twice_by_this_worker_succeeds_it_once(work, clock, events):
    # The first ack waited until the lease lapsed (a locked table), and this worker's own
    # claimer took the job again: the flush holds both claims of it.
    harness = Harness(lambda payload, job: None)
    job = work.enqueue(1)
    old = work.claim_one("w")
    harness.inflight.add(old)
    harness.executor.run(old)
    clock.advance(31)
    new = work.claim_one("w")
    harness.inflight.add(new)
    harness.executor.run(new)
    events.clear()
    assert harness.acker.flush() == 1
    assert events == [("succeeded", job.id)]
    assert (
        harness.stats.snapshot()["work"]["succeeded"],
        harness.stats.snapshot()["work"]["lost"],
    ) == (1, 1)
    assert harness.inflight.count() == 0
    assert work.get_job(job.id) is None


def test_the_old_and_the_new_claim_of_one_job_are_held_apart(work, clock):
    inflight = InFlight()
    work.enqueue(1)
    old = work.claim_one("w")
    inflight.add(old)
    clock.advance(31)
    new = work.claim_one("w")
    inflight.add(new)
    assert inflight.count() == 2
    inflight.handlers_done([old])
    assert inflight.is_running(new) and inflight.running() == 1
    inflight.remove(old)
    assert inflight.all() == [new]


def test_job_values_handed_to_handlers_are_jobs(work):
    got = []
    work.enqueue({"a": 1}, priority=4)
    Harness(lambda payload, job: got.append(job)).run(work.claim_one("w"))
    assert isinstance(got[0], Job)
    assert (got[0].priority, got[0].state, got[0].claimed_by) == (4, "claimed", "w")


def test_a_raising_signal_receiver_does_not_strand_the_job(work, caplog):
    def broken(sender, job, **kwargs):
        raise RuntimeError("alerting is down")

    job_started.connect(broken)
    job_succeeded.connect(broken)
    try:
        job = work.enqueue(1)
        Harness(lambda payload, job: None).run(work.claim_one("w"))
    finally:
        job_started.disconnect(broken)
        job_succeeded.disconnect(broken)
    assert work.get_job(job.id) is None
    assert "alerting is down" in caplog.text


def test_a_bad_retry_delay_falls_back_to_the_policy(work, clock, caplog):
    def handler(payload, job):
        raise Retry(delay=-5)

    job = work.enqueue(1)
    Harness(handler).run(work.claim_one("w"))
    assert work.get_job(job.id).run_at == clock.now + timedelta(seconds=10)
    assert "using the retry policy" in caplog.text


def test_system_exit_from_a_handler_is_a_failure_of_that_job(work):
    def handler(payload, job):
        raise SystemExit(3)

    job = work.enqueue(1)
    Harness(handler).run(work.claim_one("w"))
    stored = work.get_job(job.id)
    assert stored.state == "scheduled"
    assert stored.last_error.startswith("SystemExit: 3")


def test_a_heartbeat_while_a_failed_job_is_retried_is_not_taken_for_a_lost_claim(work, caplog):
    # The retry clears the claim in the handler's thread; a heartbeat between that commit and
    # the job's release (here: in the retry's signal) must see a job settling, not one whose
    # claim another worker took (issue 53's stress run logged one such refusal on MariaDB).
    def fail(payload, job):
        raise ValueError("try again")

    harness = Harness(fail)
    work.enqueue({"x": 1})
    handle = work.claim_one("w")
    during: list[bool] = []

    def heartbeat_now(sender, job, **kwargs):
        during.append(harness.inflight.is_running(handle))
        HeartbeatService(harness.inflight, "default").run_once(work.clock())

    job_retried.connect(heartbeat_now)
    try:
        harness.run(handle)
    finally:
        job_retried.disconnect(heartbeat_now)
    assert during == [False]
    assert "heartbeat refused" not in caplog.text
