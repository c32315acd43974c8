"""Limits changed while workers run (issue 34, rule 6), with a real worker: the override
applies within a poll interval, and wins over the code's limit across a worker restart.
shop-throttled's @consumer declares concurrency=1. And the worker's acker frees a capped
queue's slots without its ack window, and only then wakes the claimer."""

from __future__ import annotations

import signal
import time

import pytest

from django_alkqueue import RetryPolicy, operations, queue
from django_alkqueue.clock import system_clock
from django_alkqueue.consumers import ConsumerSpec, consumer, registry
from django_alkqueue.limits import REFRESH_EVERY
from django_alkqueue.models import Consumer, QueueMessage
from django_alkqueue.reports.worker_stats import WorkerStats
from django_alkqueue.worker.acker import AckService
from django_alkqueue.worker.executor import Executor
from django_alkqueue.worker.flow_state import FlowState
from django_alkqueue.worker.inflight import InFlight
from tests.conftest import wait_until
from tests.test_worker_command import workers  # noqa: F401  (the fixture)
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "shop-throttled"
POLL = 1.0  # the default poll interval
#: A claim sees a changed limit at its next full look (one poll interval) once the worker's
#: limits cache has been read again (REFRESH_EVERY); the rest is process scheduling.
APPLIES_WITHIN = POLL + REFRESH_EVERY + 1.5


def claimed() -> int:
    return QueueMessage.objects.filter(queue=QUEUE, claim_token__isnull=False).count()


def start(workers):  # noqa: F811
    return workers("--queue", QUEUE, "--concurrency", "4", "--poll-interval", str(POLL),
                   "--shutdown-timeout", "0")  # fmt: skip


def test_a_worker_applies_a_changed_limit_within_a_poll_interval(workers):  # noqa: F811
    queue(QUEUE).enqueue_many([{"sleep": 30}] * 8)
    worker = start(workers)
    wait_until(lambda: claimed() == 1, timeout=20, what=f"the code's cap:\n{worker.output}")

    operations.set_limits(QUEUE, concurrency=3)
    changed_at = time.monotonic()
    wait_until(lambda: claimed() == 3, timeout=20, what=f"the new cap:\n{worker.output}")

    assert time.monotonic() - changed_at <= APPLIES_WITHIN
    assert claimed() == 3


def test_the_override_wins_over_the_code_across_a_worker_restart(workers):  # noqa: F811
    queue(QUEUE).enqueue_many([{"sleep": 30}] * 8)
    first = start(workers)
    wait_until(lambda: claimed() == 1, timeout=20, what=f"the code's cap:\n{first.output}")
    operations.set_limits(QUEUE, concurrency=2)
    wait_until(lambda: claimed() == 2, timeout=20, what=f"the override:\n{first.output}")
    first.stop(signal.SIGTERM, timeout=30)
    wait_until(lambda: claimed() == 0, timeout=10, what="the stopped worker's jobs released")

    second = start(workers)

    wait_until(lambda: claimed() == 2, timeout=20, what=f"the override kept:\n{second.output}")
    row = Consumer.objects.get(queue=QUEUE)
    assert row.code_limits == {"concurrency": 1}  # written again by the second worker
    assert row.limit_overrides == {"concurrency": 2}


class ClaimedByAWorker:
    """A queue claimed the way a worker claims it: through the worker's flow state, which
    its acker shares."""

    def __init__(self, queue):
        self.queue = queue
        self.flow = FlowState()

    def claim(self, worker_id, n):
        return self.flow.claim(self.queue, worker_id, n)

    def claim_one(self, worker_id):
        (handle,) = self.claim(worker_id, 1)
        return handle


@pytest.fixture
def capped(make_queue):
    """A queue with concurrency=1 and two jobs."""
    consumer("flow-acked-now", concurrency=1)(lambda payload, job: None)
    q = make_queue("flow-acked-now")
    q.enqueue_many([1, 2])
    yield ClaimedByAWorker(q)
    registry.unregister("flow-acked-now")


def submitted_to_a_long_window(handle, flow):
    acker = AckService("default", InFlight(), WorkerStats(), window=3600, flow=flow)
    acker.inflight.add(handle)
    acker.submit_all([handle], 0.0)
    return acker


def test_the_ack_of_a_job_whose_cap_held_a_claim_back_does_not_wait_for_the_window(capped):
    handle = capped.claim_one("w")
    assert capped.claim("w", 1) == []  # the cap holds the next claim back

    acker = submitted_to_a_long_window(handle, capped.flow)

    assert acker.interval == 0.0  # its slot is free for the next claim at once
    assert acker.run_once(system_clock()) == 1


def test_the_ack_of_a_capped_queues_job_waits_for_the_window_while_claims_get_their_fill(capped):
    (handle,) = capped.claim("w", 1)  # all it asked for: nobody waits for a slot

    acker = submitted_to_a_long_window(handle, capped.flow)

    assert acker.interval > 3000


def run_by_an_executor(handle, flow):
    """`handle`'s job run by a worker's executor whose acker waits a long window; returns
    the executor's InFlight, whose `changed` is the claimer's wake-up."""
    inflight = InFlight()
    acker = AckService("default", inflight, WorkerStats(), window=3600, flow=flow)
    spec = ConsumerSpec(queue=handle.queue.name, handler=lambda payload, job: None,
                        path="tests.handler", lease=None, max_attempts=None,
                        retry=RetryPolicy(), atomic=False, batch=None)  # fmt: skip
    executor = Executor({spec.queue: spec}, acker, inflight, WorkerStats(), "default")
    inflight.add(handle)
    inflight.changed.clear()
    executor.run(handle)
    return inflight, acker


def test_a_job_whose_cap_held_a_claim_back_wakes_the_claimer_once_its_ack_commits(capped):
    handle = capped.claim_one("w")
    assert capped.claim("w", 1) == []  # a claim waits for the slot

    inflight, acker = run_by_an_executor(handle, capped.flow)

    assert not inflight.changed.is_set()  # a claim now would find the slot still held
    assert acker.run_once(system_clock()) == 1
    assert inflight.changed.is_set()


def test_a_capped_queues_job_wakes_the_claimer_when_its_handler_returns_while_claims_get_their_fill(
    capped,
):
    (handle,) = capped.claim("w", 1)  # nobody waits for a slot

    inflight, _ = run_by_an_executor(handle, capped.flow)

    assert inflight.changed.is_set()  # its thread is free for another queue's jobs


@pytest.mark.parametrize("stored", [{"rate": [5, 10**400]}, {"rate": "9" * 5000 + "/s"}])
def test_a_worker_ignores_a_stored_override_that_does_not_parse_and_says_so(stored):
    """A limit written into the Consumer row by hand (or by a release that let a huge number
    through) is left out, with a warning: the claimer does not die on it (exit 70)."""
    Consumer.objects.create(queue=QUEUE, handler="testproject.shop.consumers.call_fragile_api",
                            lease=30, max_attempts=3, limit_overrides=stored)  # fmt: skip
    jobs = queue(QUEUE).enqueue_many([{}] * 3)

    output = run_worker("--queue", QUEUE, "--burst")

    assert not QueueMessage.objects.filter(id__in=[j.id for j in jobs]).exists()
    assert f"queue {QUEUE}: the stored override limit 'rate'=" in output
    assert "is ignored" in output
