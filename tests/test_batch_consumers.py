"""Batch consumers: @consumer(queue, batch=n) handlers take up to n jobs of a claim per call,
and each job still settles on its own (ack, retry, dead letter)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_alkqueue import Fail, InvalidOption, Job, Retry, RetryPolicy, consumer, queue
from django_alkqueue.consumers import ConsumerSpec, registry
from django_alkqueue.models import DeadLetter
from django_alkqueue.queues import MAX_CLAIM
from django_alkqueue.signals import job_started, job_succeeded
from django_alkqueue.worker.units import split, worker_capacity
from testproject.shop.models import HandlerRun
from tests.test_consumers import scratch_queue  # noqa: F401  (the fixture)
from tests.test_executor import Harness
from tests.test_worker_command import workers  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def _spec(handler, batch=10, name="work"):
    return ConsumerSpec(
        queue=name, handler=handler, path="tests.batch_handler", lease=None, max_attempts=None,
        retry=RetryPolicy(backoff="constant", base=10, jitter=False), atomic=False, batch=batch,
    )  # fmt: skip


def batch_harness(handler):
    """The executor test harness around a batch consumer of 10 jobs per call."""
    return Harness(handler, batch=10)


@pytest.fixture
def work(make_queue):
    return make_queue("work", max_attempts=3)


# -- one call, many jobs ---------------------------------------------------------------------


def test_a_batch_handler_is_called_once_with_the_jobs_in_handout_order(work):
    calls: list[list[object]] = []
    jobs = work.enqueue_many([{"n": n} for n in range(5)])
    batch_harness(lambda batch: calls.append([job.payload for job in batch])).run_unit(
        work.claim("w", 5)
    )
    assert calls == [[{"n": n} for n in range(5)]]
    assert all(work.get_job(job.id) is None for job in jobs)


def test_a_job_the_time_limits_settled_during_the_call_is_not_acked_and_the_rest_are(work):
    late, on_time = work.enqueue_many([1, 2])
    handles = work.claim("w", 2)
    harness = batch_harness(lambda batch: None)

    def handler(batch):
        harness.inflight.run_of(handles[0]).settle()  # what the time limits do at a deadline

    harness.executor.specs["work"] = _spec(handler)
    harness.run_unit(handles)
    assert work.get_job(late.id).state == "claimed"  # its outcome is the time limits' to give
    assert work.get_job(on_time.id) is None


def test_returning_none_acks_every_job_and_counts_each(work):
    work.enqueue_many(range(4))
    harness = batch_harness(lambda batch: None)
    harness.run_unit(work.claim("w", 4))
    assert work.depth() == 0
    assert harness.stats.snapshot()["work"]["succeeded"] == 4
    assert harness.inflight.count() == 0


def test_each_job_of_the_call_sends_its_own_started_and_succeeded_signals(work):
    seen: list[tuple[str, int]] = []

    def started(sender, job, **kwargs):
        seen.append(("started", job.id))

    def succeeded(sender, job, **kwargs):
        seen.append(("succeeded", job.id))

    job_started.connect(started)
    job_succeeded.connect(succeeded)
    try:
        a, b = work.enqueue_many([1, 2])
        batch_harness(lambda batch: None).run_unit(work.claim("w", 2))
    finally:
        job_started.disconnect(started)
        job_succeeded.disconnect(succeeded)
    assert seen == [("started", a.id), ("started", b.id), ("succeeded", a.id),
                    ("succeeded", b.id)]  # fmt: skip


def test_returned_failures_settle_those_jobs_alone_and_the_rest_are_acked(work, clock):
    ok, retried, delayed, failed = work.enqueue_many(["ok", "retry", "delay", "fail"])

    def handler(batch):
        return {
            retried.id: ConnectionError("smtp down"),
            delayed.id: Retry(delay=timedelta(minutes=3)),
            failed.id: Fail("no such address"),
        }

    harness = batch_harness(handler)
    harness.run_unit(work.claim("w", 4))
    assert work.get_job(ok.id) is None
    stored = work.get_job(retried.id)
    assert stored.state == "scheduled" and stored.run_at == clock.now + timedelta(seconds=10)
    assert stored.last_error.startswith("ConnectionError: smtp down")
    assert work.get_job(delayed.id).run_at == clock.now + timedelta(minutes=3)
    dead = work.get_job(failed.id)
    assert (dead.state, dead.reason, dead.last_error) == ("dead", "failed", "no such address")
    counts = harness.stats.snapshot()["work"]
    assert (counts["succeeded"], counts["retried"], counts["dead"]) == (1, 2, 1)
    assert harness.inflight.count() == 0


def test_a_handler_that_raises_retries_every_job_of_the_call(work, clock):
    jobs = work.enqueue_many(range(3))

    def handler(batch):
        raise TimeoutError("provider timed out")

    batch_harness(handler).run_unit(work.claim("w", 3))
    for job in jobs:
        stored = work.get_job(job.id)
        assert stored.state == "scheduled", job
        assert stored.last_error.startswith("TimeoutError: provider timed out")


def test_a_handler_that_empties_its_list_and_raises_still_retries_every_job(work):
    jobs = work.enqueue_many(range(3))

    def handler(batch):
        batch.clear()
        raise TimeoutError("provider timed out")

    batch_harness(handler).run_unit(work.claim("w", 3))
    assert [work.get_job(job.id).state for job in jobs] == ["scheduled"] * 3


def test_a_return_value_that_is_not_a_mapping_fails_the_call_instead_of_acking(work):
    jobs = work.enqueue_many(range(2))
    batch_harness(lambda batch: [job.id for job in batch]).run_unit(work.claim("w", 2))
    for job in jobs:
        stored = work.get_job(job.id)
        assert stored.state == "scheduled"
        assert stored.last_error.startswith("TypeError: a batch handler returns None or a mapping")


def test_a_failure_for_a_job_outside_the_call_fails_the_whole_call(work):
    jobs = work.enqueue_many(range(2))
    batch_harness(lambda batch: {10**12: ValueError("?")}).run_unit(work.claim("w", 2))
    for job in jobs:
        assert work.get_job(job.id).last_error.startswith(
            "TypeError: a batch handler returned a failure for job 1000000000000"
        )


def test_a_failure_that_is_not_an_exception_fails_the_whole_call(work):
    first, second = work.enqueue_many(range(2))
    batch_harness(lambda batch: {first.id: "oops"}).run_unit(work.claim("w", 2))
    assert work.get_job(second.id).last_error.startswith("TypeError: a batch handler returned")


def test_the_last_attempt_of_a_returned_failure_dead_letters_it(work, clock):
    job = work.enqueue("x")
    harness = batch_harness(lambda batch: {batch[0].id: ValueError("still bad")})
    for _ in range(3):
        harness.run_unit(work.claim("w", 1))
        clock.advance(10)
    dead = work.get_job(job.id)
    assert (dead.state, dead.reason, dead.attempts) == ("dead", "max attempts exceeded", 3)


def test_a_keyboard_interrupt_lets_every_job_of_the_call_go_unsettled(work):
    work.enqueue_many(range(2))

    def handler(batch):
        raise KeyboardInterrupt

    harness = batch_harness(handler)
    handles = work.claim("w", 2)
    harness.inflight.add_all(handles)
    with pytest.raises(KeyboardInterrupt):
        harness.executor.run_unit(handles)
    assert harness.inflight.count() == 0
    assert all(work.get_job(h.job.id).state == "claimed" for h in handles)  # the lease decides


def test_jobs_let_go_by_a_shutdown_are_left_out_of_the_call(work):
    calls: list[list[int]] = []
    work.enqueue_many(range(3))
    harness = batch_harness(lambda batch: calls.append([job.id for job in batch]))
    handles = work.claim("w", 3)
    harness.inflight.add_all(handles)
    harness.inflight.remove(handles[1])  # what the shutdown does before it releases a job
    harness.executor.run_unit(handles)
    assert calls == [[handles[0].job.id, handles[2].job.id]]


# -- units of work ---------------------------------------------------------------------------


def test_a_claim_is_split_into_calls_of_at_most_the_consumer_batch(work):
    work.enqueue_many(range(7))
    handles = work.claim("w", 7)
    units = list(split(handles, _spec(lambda batch: None, batch=3)))
    assert [len(unit) for unit in units] == [3, 3, 1]
    assert [h for unit in units for h in unit] == handles


def test_a_plain_consumer_gets_one_call_per_job(work):
    work.enqueue_many(range(3))
    handles = work.claim("w", 3)
    plain = _spec(lambda payload, job: None, batch=None)
    assert list(split(handles, plain)) == [[h] for h in handles]


def test_a_worker_holds_a_full_call_per_thread_for_a_batch_consumer():
    plain, batch = _spec(None, batch=None), _spec(None, batch=50)
    assert worker_capacity(4, None, [plain]) == 4
    assert worker_capacity(4, None, [plain, batch]) == 200
    assert worker_capacity(4, 1000, [batch]) == 1000


# -- the decorator ---------------------------------------------------------------------------


def test_consumer_registers_a_batch_handler_with_its_size(scratch_queue):  # noqa: F811
    @consumer(scratch_queue, batch=25)
    def handler(jobs: list[Job]) -> None:
        return None

    spec = registry.get(scratch_queue)
    assert (spec.handler, spec.batch) == (handler, 25)


@pytest.mark.parametrize("bad", [0, -1, MAX_CLAIM + 1, 2.5, "10", True])
def test_a_bad_batch_size_raises_invalid_option_and_registers_nothing(scratch_queue, bad):  # noqa: F811
    with pytest.raises(InvalidOption, match="batch must be"):
        consumer(scratch_queue, batch=bad)
    assert registry.get(scratch_queue) is None


def test_batch_and_atomic_cannot_be_combined(scratch_queue):  # noqa: F811
    with pytest.raises(InvalidOption, match="batch and atomic cannot be combined"):
        consumer(scratch_queue, batch=10, atomic=True)
    assert registry.get(scratch_queue) is None


# -- a real worker ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_burst_worker_runs_a_batch_consumer_in_calls_of_at_most_its_batch(workers):  # noqa: F811
    receipts = queue("shop-receipts")
    plain = receipts.enqueue_many([{"n": n} for n in range(118)])
    flaky = receipts.enqueue({"fail_times": 1})
    doomed = receipts.enqueue({"fail": "no such address"})
    worker = workers("--queue", "shop-receipts", "--burst", "--concurrency", "2")

    assert worker.wait(timeout=60) == 0, worker.output

    assert receipts.depth() == 0
    runs = list(HandlerRun.objects.filter(queue="shop-receipts").values_list("job_id", "note"))
    assert sorted(job_id for job_id, _ in runs) == sorted(
        [j.id for j in plain] + [flaky.id, flaky.id, doomed.id]
    )  # each job once, the flaky one twice
    sizes: dict[str, int] = {}
    for _, note in runs:
        sizes[note] = sizes.get(note, 0) + 1
    assert all(size <= 50 for size in sizes.values())
    assert max(sizes.values()) > 1  # many jobs per call, not one each
    assert all(note.endswith(f" of {size}") for note, size in sizes.items())
    assert DeadLetter.objects.get(job_id=doomed.id).reason == "failed"
