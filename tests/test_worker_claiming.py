"""When the claim loop claims: a top-up after a finished job waits for the refill mark, a full
look (a NOTIFY, or a poll interval since the last one) claims any free slot. In-process with
a hand-moved monotonic clock, then a real worker whose other threads run long jobs."""

from __future__ import annotations

import pytest

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from django_alkqueue.queues import JobHandle, Queue
from django_alkqueue.worker.claimer import Claimer, PausedQueues
from django_alkqueue.worker.inflight import InFlight
from testproject.shop.models import HandlerRun
from tests.conftest import wait_until
from tests.test_worker_command import Running, workers  # noqa: F401  (the fixture)


class Ticks:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Busy:
    """A claimer of capacity 4 (refill mark 2) over `q`, polling every second."""

    def __init__(self, q: Queue, follow_up: float | None = None) -> None:
        self.ticks = Ticks()
        self.inflight = InFlight()
        self.dispatched: list[JobHandle] = []
        paused = PausedQueues("default", [q.name], every=60.0)
        self.claimer = Claimer(
            [q], "w", self.inflight, self.dispatched.extend, 4, None, paused, None,
            poll_interval=1.0, follow_up=follow_up, monotonic=self.ticks,
        )  # fmt: skip

    def finish(self, count: int) -> None:
        """`count` of the running jobs' handlers return."""
        running = [h for h in self.dispatched if self.inflight.is_running(h)]
        for handle in running[:count]:
            self.inflight.handlers_done([handle])


def started(busy: Busy) -> Busy:
    assert busy.claimer.run_once() == 4  # the first look is a full one
    return busy


@pytest.fixture
def busy(q: Queue) -> Busy:
    q.enqueue_many(range(10))
    return started(Busy(q))


@pytest.fixture
def following(q: Queue) -> Busy:
    """The same claimer, following each NOTIFY up 0.3 s later."""
    q.enqueue_many(range(10))
    return started(Busy(q, follow_up=0.3))


class Waits:
    """Stands in for the wake-up event: records how long the claimer would sleep."""

    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        return False

    def clear(self) -> None:
        pass


@pytest.mark.django_db
def test_a_top_up_with_one_slot_free_below_the_refill_mark_claims_nothing(busy):
    busy.finish(1)
    busy.ticks.now += 0.5

    assert busy.claimer.run_once() == 0


@pytest.mark.django_db
def test_a_top_up_at_the_refill_mark_claims_the_free_slots(busy):
    busy.finish(2)
    busy.ticks.now += 0.5

    assert busy.claimer.run_once() == 2


@pytest.mark.django_db
def test_a_single_free_slot_is_claimed_once_a_poll_interval_has_passed(busy):
    busy.finish(1)
    busy.ticks.now += 0.5
    assert busy.claimer.run_once() == 0

    busy.ticks.now += 0.5

    assert busy.claimer.run_once() == 1


@pytest.mark.django_db
def test_a_notify_claims_a_single_free_slot_at_once(busy):
    busy.finish(1)
    busy.ticks.now += 0.1
    busy.claimer.notified.set()

    assert busy.claimer.run_once() == 1
    assert not busy.claimer.notified.is_set()


@pytest.mark.django_db
def test_a_notify_while_no_slot_is_free_does_not_make_the_next_top_up_a_full_look(busy):
    busy.ticks.now += 0.1
    busy.claimer.notified.set()
    assert busy.claimer.run_once() == 0  # all four threads busy
    busy.finish(1)
    busy.ticks.now += 0.1

    assert busy.claimer.run_once() == 0


@pytest.mark.django_db
def test_a_notify_brings_a_full_look_again_once_its_follow_up_delay_has_passed(following):
    following.ticks.now += 0.1
    following.claimer.notified.set()
    assert following.claimer.run_once() == 0  # all four threads busy: the NOTIFY is spent
    following.finish(1)
    following.ticks.now += 0.2
    assert following.claimer.run_once() == 0  # 0.2 s after the NOTIFY: a top-up

    following.ticks.now += 0.1

    assert following.claimer.run_once() == 1  # 0.3 s after: the follow-up, a full look


@pytest.mark.django_db
def test_a_follow_up_comes_once_per_notify(following):
    following.claimer.notified.set()
    assert following.claimer.run_once() == 0
    following.ticks.now += 0.3
    assert following.claimer.run_once() == 0  # the follow-up, with no slot free
    following.finish(1)
    following.ticks.now += 0.3

    assert following.claimer.run_once() == 0  # a top-up below the refill mark


@pytest.mark.django_db
def test_without_a_notify_no_follow_up_comes(following):
    following.finish(1)
    following.ticks.now += 0.5

    assert following.claimer.run_once() == 0


@pytest.mark.django_db
def test_a_later_notify_moves_the_follow_up_on(following):
    following.claimer.notified.set()
    assert following.claimer.run_once() == 0
    following.ticks.now += 0.2
    following.claimer.notified.set()
    assert following.claimer.run_once() == 0
    following.finish(1)
    following.ticks.now += 0.2
    assert following.claimer.run_once() == 0  # 0.4 s after the first, 0.2 s after the second

    following.ticks.now += 0.1

    assert following.claimer.run_once() == 1


@pytest.mark.django_db
def test_the_claimer_sleeps_no_longer_than_until_the_follow_up(following):
    following.claimer.notified.set()
    following.claimer.run_once()
    wake = Waits()

    following.claimer.wait(wake)  # type: ignore[arg-type]

    assert wake.timeouts == [pytest.approx(0.3)]


@pytest.mark.django_db
def test_with_no_follow_up_due_the_claimer_sleeps_until_the_next_poll(following):
    following.ticks.now += 0.25
    wake = Waits()

    following.claimer.wait(wake)  # type: ignore[arg-type]

    assert wake.timeouts == [pytest.approx(0.75)]  # the first full look was at 100.0


# -- a real worker ---------------------------------------------------------------------------


def is_running(job_ids: list[int]) -> bool:
    """Every one of these jobs is claimed and its handler has started."""
    claimed = QueueMessage.objects.filter(pk__in=job_ids, claim_token__isnull=False).count()
    return claimed == len(job_ids) == HandlerRun.objects.filter(job_id__in=job_ids).count()


@pytest.mark.django_db(transaction=True)
def test_a_free_thread_takes_a_due_job_while_the_other_threads_run_long_jobs(workers):  # noqa: F811
    long_jobs = [j.id for j in queue("shop-reports").enqueue_many([{"sleep": 60}] * 3)]
    worker: Running = workers(
        "--queue", "shop-reports", "--concurrency", "4", "--poll-interval", "0.2",
        "--shutdown-timeout", "0",
    )  # fmt: skip
    wait_until(lambda: is_running(long_jobs), timeout=15)

    quick = queue("shop-reports").enqueue({"n": "quick"})

    # Before, one free slot of four stayed idle until two of the hour-long jobs ended.
    wait_until(lambda: not QueueMessage.objects.filter(pk=quick.id).exists(), timeout=10)
    assert is_running(long_jobs), worker.output
    assert worker.stop() == 0, worker.output
