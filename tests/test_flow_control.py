"""Flow control (issue 34), in one process: each limit as the claim enforces it, where limits
come from, and the input rules. The concurrent rules run real workers in
tests/test_flow_control_workers.py."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_alkqueue import limits as flow
from django_alkqueue import operations
from django_alkqueue.checks import check_limits
from django_alkqueue.conf import read_settings
from django_alkqueue.consumers import consumer, registry
from django_alkqueue.exceptions import InvalidOption
from django_alkqueue.models import ClaimGate, ClaimLedger, Consumer, QueueMessage
from django_alkqueue.queues import ClaimOutcome, Queue
from django_alkqueue.worker.consumer_table import sync_consumers
from tests.clocks import FakeClock
from tests.conftest import empty_statistics_with_pages, fill_ten_queues

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "flow"


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    yield
    registry.unregister(QUEUE)


def limited(**limits: Any) -> None:
    """Register the queue's @consumer with these limits (the code's limits)."""
    consumer(QUEUE, **limits)(lambda payload, job: None)


@pytest.fixture
def fq(make_queue: Callable[..., Queue]) -> Queue:
    return make_queue(QUEUE)


def claimed_ids(queue: Queue, n: int = 100) -> list[int]:
    return [handle.job.id for handle in queue.claim("w", n)]


# -- concurrency ---------------------------------------------------------------------------


def test_concurrency_caps_the_live_claims_of_the_queue(fq: Queue) -> None:
    limited(concurrency=2)
    fq.enqueue_many([1, 2, 3, 4])
    assert len(fq.claim("w1", 10)) == 2
    assert fq.claim("w2", 10) == []


def test_the_queues_first_limited_claim_makes_its_gate_and_holds_the_cap(fq: Queue) -> None:
    limited(concurrency=2)
    fq.enqueue_many([1, 2, 3, 4])
    assert not ClaimGate.objects.filter(queue=QUEUE).exists()
    assert len(fq.claim("w1", 10)) == 2
    assert ClaimGate.objects.filter(queue=QUEUE).exists()
    assert fq.claim("w2", 10) == []


def test_an_ack_frees_its_slot(fq: Queue) -> None:
    limited(concurrency=1)
    fq.enqueue_many([1, 2])
    (first,) = fq.claim("w", 5)
    assert first.ack()
    assert len(fq.claim("w", 5)) == 1


@pytest.mark.parametrize("finish", ["retry", "release", "fail"])
def test_a_retry_release_or_failure_frees_its_slot(fq: Queue, finish: str) -> None:
    limited(concurrency=1)
    fq.enqueue_many([1, 2])
    (first,) = fq.claim("w", 5)
    assert getattr(first, finish)()
    assert len(fq.claim("w", 5)) == 1


def test_a_cancelled_job_frees_its_slot(fq: Queue) -> None:
    limited(concurrency=1)
    fq.enqueue_many([1, 2])
    (first,) = fq.claim("w", 5)
    assert fq.cancel(first.job.id)
    assert len(fq.claim("w", 5)) == 1


def test_a_lapsed_claim_keeps_its_slot_until_it_is_reclaimed(fq: Queue, clock: FakeClock) -> None:
    limited(concurrency=1)
    fq.enqueue_many([1, 2], priority=0)
    (first,) = fq.claim("w", 5)
    clock.advance(fq.lease - 1)
    assert fq.claim("w", 5) == []  # the lease is live: the slot is held
    clock.advance(2)
    (again,) = fq.claim("w", 5)  # reclaimed by the claim itself, then handed out in order
    assert again.job.id == first.job.id
    assert again.job.attempts == 2


def test_a_limited_claims_job_holds_what_its_row_holds(fq: Queue) -> None:
    limited(concurrency=5, key_concurrency=2)
    fq.enqueue_many([{"a": 1}, {"b": 2}], concurrency_key="k", priority=3)
    for handle in fq.claim("w", 5):
        assert handle.job == fq.get_job(handle.job.id)


def test_an_unlimited_queue_hands_out_everything_due(fq: Queue) -> None:
    fq.enqueue_many(range(5))
    assert len(fq.claim("w", 10)) == 5


# -- key_concurrency -----------------------------------------------------------------------


def test_key_concurrency_caps_the_live_claims_of_each_key(fq: Queue) -> None:
    limited(key_concurrency=2)
    fq.enqueue_many(range(5), concurrency_key="a")
    fq.enqueue_many(range(5), concurrency_key="b")
    handed = fq.claim("w", 100)
    assert sorted(h.job.concurrency_key for h in handed) == ["a", "a", "b", "b"]


def test_jobs_without_a_key_are_not_limited_by_key_concurrency(fq: Queue) -> None:
    limited(key_concurrency=1)
    fq.enqueue_many(range(4))
    assert len(fq.claim("w", 100)) == 4


def test_a_key_at_its_cap_does_not_block_the_jobs_behind_it(fq: Queue) -> None:
    limited(key_concurrency=1)
    flooded = fq.enqueue_many(range(50), concurrency_key="flood")
    others = [fq.enqueue(i, concurrency_key=f"k{i}") for i in range(3)]
    handed = claimed_ids(fq, 4)
    assert handed == [flooded[0].id, *(job.id for job in others)]


def test_key_concurrency_one_runs_each_key_in_handout_order(fq: Queue) -> None:
    limited(key_concurrency=1)
    jobs = fq.enqueue_many(range(3), concurrency_key="customer:42")
    order = []
    for _ in jobs:
        (handle,) = fq.claim("w", 10)
        order.append(handle.job.id)
        assert fq.claim("w", 10) == []
        handle.ack()
    assert order == [job.id for job in jobs]


def test_the_claimed_job_carries_its_concurrency_key(fq: Queue) -> None:
    fq.enqueue({"id": 42}, concurrency_key="customer:42")
    (handle,) = fq.claim("w")
    assert handle.job.concurrency_key == "customer:42"


def test_enqueue_many_takes_a_key_per_payload(fq: Queue) -> None:
    jobs = fq.enqueue_many(
        [{"id": 1}, {"id": 2}, {}], concurrency_key=lambda p: p.get("id") and f"c{p['id']}"
    )
    assert [job.concurrency_key for job in jobs] == ["c1", "c2", None]
    stored = dict(QueueMessage.objects.values_list("id", "concurrency_key"))
    assert [stored[job.id] for job in jobs] == ["c1", "c2", None]


def test_a_requeued_dead_letter_keeps_its_concurrency_key(fq: Queue) -> None:
    job = fq.enqueue(1, concurrency_key="acct:7")
    (handle,) = fq.claim("w")
    handle.fail("boom")
    assert fq.get_job(job.id).concurrency_key == "acct:7"
    assert fq.requeue(job.id).concurrency_key == "acct:7"


# -- rate and key_rate ---------------------------------------------------------------------


def test_rate_caps_the_claims_in_any_window_of_its_period(fq: Queue, clock: FakeClock) -> None:
    limited(rate="3/s")
    fq.enqueue_many(range(20))
    assert len(fq.claim("w", 10)) == 3
    clock.advance(0.999)
    assert fq.claim("w", 10) == []
    clock.advance(0.001)  # the window [t, t + 1 s) is half-open
    assert len(fq.claim("w", 10)) == 3


def test_rate_counts_claims_even_when_the_jobs_finished(fq: Queue, clock: FakeClock) -> None:
    limited(rate=(2, timedelta(minutes=1)))
    fq.enqueue_many(range(5))
    for handle in fq.claim("w", 10):
        handle.ack()
    clock.advance(30)
    assert fq.claim("w", 10) == []


def test_a_retry_is_counted_by_the_rate_again(fq: Queue, clock: FakeClock) -> None:
    limited(rate="2/m")
    fq.enqueue(1)
    (handle,) = fq.claim("w")
    handle.retry(delay=0)
    (again,) = fq.claim("w")
    again.retry(delay=0)
    assert fq.claim("w") == []


def test_key_rate_caps_each_key_on_its_own(fq: Queue, clock: FakeClock) -> None:
    limited(key_rate="2/s")
    fq.enqueue_many(range(5), concurrency_key="a")
    fq.enqueue_many(range(5), concurrency_key="b")
    assert sorted(h.job.concurrency_key for h in fq.claim("w", 100)) == ["a", "a", "b", "b"]
    assert fq.claim("w", 100) == []
    clock.advance(1)
    assert len(fq.claim("w", 100)) == 4


def test_the_ledger_keeps_no_row_older_than_the_period(fq: Queue, clock: FakeClock) -> None:
    limited(rate="5/s")
    fq.enqueue_many(range(20))
    fq.claim("w", 2)
    clock.advance(2)
    fq.claim("w", 2)
    assert ClaimLedger.objects.filter(claimed_at__lt=clock.now).count() == 0


# -- what a claim says its limits did -------------------------------------------------------


def within_limits(queue: Queue, n: int) -> ClaimOutcome:
    """The claim a worker makes: within the limits in force, saying what they did."""
    return queue.claim_within("w", n, flow.limits_in_force(QUEUE).limits)


def test_a_claim_the_cap_held_back_says_so(fq: Queue) -> None:
    limited(concurrency=1)
    fq.enqueue_many([1, 2])
    outcome = within_limits(fq, 2)
    assert (len(outcome.handles), outcome.held_back) == (1, True)


def test_a_capped_claim_that_found_too_few_due_jobs_says_its_limits_did_not_hold_it_back(
    fq: Queue,
) -> None:
    limited(concurrency=5)
    fq.enqueue_many([1, 2])
    outcome = within_limits(fq, 4)
    assert (len(outcome.handles), outcome.held_back) == (2, False)


def test_a_claim_that_got_all_it_asked_for_was_not_held_back(fq: Queue) -> None:
    limited(concurrency=2)
    fq.enqueue_many([1, 2, 3])
    outcome = within_limits(fq, 2)
    assert (len(outcome.handles), outcome.held_back) == (2, False)


def test_a_short_claim_of_a_queue_with_a_key_limit_says_it_may_have_been_held_back(
    fq: Queue,
) -> None:
    limited(key_concurrency=1)
    fq.enqueue_many([1, 2], concurrency_key="k")
    outcome = within_limits(fq, 2)
    assert (len(outcome.handles), outcome.held_back) == (1, True)


def test_a_claim_whose_rate_window_is_spent_says_when_the_rate_frees_room(
    fq: Queue, clock: FakeClock
) -> None:
    limited(rate="2/s")
    fq.enqueue_many(range(5))
    assert len(within_limits(fq, 2).handles) == 2  # spends the window
    clock.advance(0.25)
    outcome = within_limits(fq, 2)
    assert (outcome.handles, outcome.held_back) == ([], True)
    assert outcome.room_in == pytest.approx(0.75)


def test_a_claim_its_rate_left_room_for_names_no_time(fq: Queue) -> None:
    limited(rate="10/s")
    fq.enqueue_many([1, 2])
    outcome = within_limits(fq, 5)
    assert (len(outcome.handles), outcome.held_back, outcome.room_in) == (2, False, None)


# -- where the limits come from ------------------------------------------------------------


def test_the_limits_of_a_queue_without_consumer_come_from_the_settings(fq: Queue) -> None:
    with override_settings(ALKQUEUE={"QUEUES": {QUEUE: {"concurrency": 1, "rate": "10/m"}}}):
        in_force = flow.limits_in_force(QUEUE)
        assert in_force.limits == flow.Limits(concurrency=1, rate=flow.Rate(10, 60.0))
        assert in_force.sources == {"concurrency": "settings", "rate": "settings"}
        fq.enqueue_many([1, 2])
        assert len(fq.claim("w", 10)) == 1


def test_an_override_wins_over_the_code_until_reset() -> None:
    limited(concurrency=8, rate="100/s")
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    operations.set_limits(QUEUE, concurrency=2, rate=None)
    in_force = flow.limits_in_force(QUEUE)
    assert in_force.limits == flow.Limits(concurrency=2)
    assert in_force.sources == {"concurrency": "override", "rate": "override"}
    operations.reset_limits(QUEUE)
    in_force = flow.limits_in_force(QUEUE)
    assert in_force.limits == flow.Limits(concurrency=8, rate=flow.Rate(100, 1.0))
    assert in_force.sources == {"concurrency": "code", "rate": "code"}


def test_a_worker_restart_keeps_the_override() -> None:
    limited(concurrency=8)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    operations.set_limits(QUEUE, concurrency=3)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)  # the restart
    assert flow.limits_in_force(QUEUE).limits.concurrency == 3


def test_the_admin_process_sees_the_code_limits_the_worker_wrote() -> None:
    limited(key_concurrency=1, key_rate="5/m")
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    registry.unregister(QUEUE)  # a process without the consumer's code
    in_force = flow.limits_in_force(QUEUE)
    assert in_force.limits == flow.Limits(key_concurrency=1, key_rate=flow.Rate(5, 60.0))
    assert in_force.sources == {"key_concurrency": "code", "key_rate": "code"}


def test_a_claim_applies_a_changed_limit_within_the_refresh_interval(
    fq: Queue, clock: FakeClock
) -> None:
    limited(concurrency=1)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    fq.enqueue_many(range(5))
    assert len(fq.claim("w", 10)) == 1
    operations.set_limits(QUEUE, concurrency=3)  # read again at once in this process
    assert len(fq.claim("w", 10)) == 2


def changed_by_another_process(**overrides: object) -> None:
    """The queue's limit overrides written as another process's set_limits writes them."""
    Consumer.objects.filter(queue=QUEUE).update(limit_overrides=overrides)


def test_a_queue_keeps_the_limits_it_read_until_its_clock_passes_the_refresh_interval(
    fq: Queue, clock: FakeClock
) -> None:
    limited(concurrency=1)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    fq.enqueue_many(range(5))
    assert len(fq.claim("w", 10)) == 1
    changed_by_another_process(concurrency=3)
    clock.advance(flow.REFRESH_EVERY / 2)
    assert fq.claim("w", 10) == []
    clock.advance(flow.REFRESH_EVERY / 2)
    assert len(fq.claim("w", 10)) == 2


def test_a_queue_whose_clock_was_set_back_reads_its_limits_again(
    fq: Queue, clock: FakeClock
) -> None:
    limited(concurrency=1)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    fq.enqueue_many(range(5))
    clock.advance(60)
    assert len(fq.claim("w", 10)) == 1
    changed_by_another_process(concurrency=3)
    clock.advance(-30)
    assert len(fq.claim("w", 10)) == 2


# -- bad input -----------------------------------------------------------------------------

BAD_LIMITS = [
    {"concurrency": 0},
    {"concurrency": 100_001},
    {"concurrency": True},
    {"concurrency": "8"},
    {"key_concurrency": -1},
    {"rate": "10/d"},
    {"rate": "0/s"},
    {"rate": (5, "seconds")},
    {"rate": (100_001, timedelta(seconds=1))},
    {"key_rate": "many"},
    # Numbers past what int() prints or float() holds: InvalidOption, never ValueError or
    # OverflowError.
    {"rate": "9" * 5000 + "/s"},
    {"rate": (5, 10**400)},
    {"key_rate": (10**5000, 5)},
    {"rate": (5, 1e400)},
    {"rate": (5, math.nan)},
    {"rate": (5, math.inf)},
    {"rate": (math.inf, 5)},
    {"concurrency": 10**5000},
    {"key_concurrency": 1e400},
    {"concurrency": math.nan},
]


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_consumer_refuses_a_bad_limit_and_registers_nothing(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidOption):
        consumer(QUEUE, **bad)
    assert registry.get(QUEUE) is None


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_set_limits_refuses_a_bad_limit_and_writes_nothing(bad: dict[str, Any]) -> None:
    limited(concurrency=4)
    sync_consumers([registry.get(QUEUE)], "default", takeover=False)
    with pytest.raises(InvalidOption):
        operations.set_limits(QUEUE, **bad)
    assert Consumer.objects.get(queue=QUEUE).limit_overrides == {}


def test_set_limits_refuses_a_queue_without_consumer_row() -> None:
    with pytest.raises(InvalidOption):
        operations.set_limits(QUEUE, concurrency=1)
    assert not Consumer.objects.exists()


@pytest.mark.parametrize("bad", BAD_LIMITS)
def test_the_settings_refuse_a_bad_limit(bad: dict[str, Any]) -> None:
    with pytest.raises(ImproperlyConfigured):
        read_settings({"QUEUES": {QUEUE: bad}})


@pytest.mark.parametrize("key", ["", "x" * 256, "a\x00b", 42])
def test_enqueue_refuses_a_bad_concurrency_key_and_writes_nothing(fq: Queue, key: Any) -> None:
    with pytest.raises(InvalidOption):
        fq.enqueue(1, concurrency_key=key)
    with pytest.raises(InvalidOption):
        fq.enqueue_many([1, 2], concurrency_key=lambda payload: key)
    assert not QueueMessage.objects.exists()


# -- the system check ----------------------------------------------------------------------


def test_the_check_reports_a_queue_with_different_limits_in_code_and_settings() -> None:
    limited(concurrency=8)
    with override_settings(ALKQUEUE={"QUEUES": {QUEUE: {"concurrency": 4}}}):
        (error,) = check_limits()
    assert error.id == "alkqueue.E005"
    assert "concurrency 8 in code, 4 in settings" in error.msg


def test_the_check_passes_equal_limits_in_code_and_settings() -> None:
    limited(concurrency=8, rate="60/m")
    settings = {"QUEUES": {QUEUE: {"concurrency": 8, "rate": (60, timedelta(minutes=1))}}}
    with override_settings(ALKQUEUE=settings):
        assert check_limits() == []


# -- PostgreSQL's statements ---------------------------------------------------------------


@pytest.mark.postgres_only
def test_the_postgresql_limited_claim_reads_its_indexes_on_100k_rows() -> None:
    from django.db import connection

    from django_alkqueue.limits import Rate
    from django_alkqueue.sql.postgresql.limited_claim import (
        LIMITED_CHOOSE,
        LIMITED_STAMP,
        choose_params,
        stamp_params,
    )

    every = flow.Limits(concurrency=8, key_concurrency=1, rate=Rate(100, 1.0),
                        key_rate=Rate(10, 60.0))  # fmt: skip
    now = datetime.now(UTC)
    with connection.cursor() as cursor:
        fill_ten_queues(cursor)
        cursor.execute("EXPLAIN " + LIMITED_CHOOSE, choose_params("q3", 10, now, every, 36))
        choose = "\n".join(row[0] for row in cursor.fetchall())
        params = stamp_params("q3", "w", [1, 2, 3], now, every, uuid.uuid4())
        cursor.execute("EXPLAIN " + LIMITED_STAMP, params)
        stamp = "\n".join(row[0] for row in cursor.fetchall())
    for index in ("alkqueue_pending_idx", "alkqueue_lease_idx", "alkqueue_claimledger_idx"):
        assert index in choose, choose
    assert "Seq Scan on alkqueue_message" not in choose, choose
    assert "alkqueue_message_pkey" in stamp, stamp
    assert "Seq Scan on alkqueue_message" not in stamp, stamp


@pytest.mark.postgres_only
def test_the_limited_stamp_finds_its_rows_by_key_when_the_statistics_were_taken_empty(
    frozen_statistics: None,
) -> None:
    """Under statistics of an empty table the claim index (alkqueue_pending_idx), whose
    predicate the stamp's own condition matched, looked as cheap as the primary key, and
    each stamp walked it whole (6 ms for 4 rows at 20,000 pending)."""
    from django.db import connection

    from django_alkqueue.sql.postgresql.limited_claim import LIMITED_STAMP, stamp_params

    limits = flow.Limits(key_concurrency=1)
    with connection.cursor() as cursor:
        empty_statistics_with_pages(cursor)
        fill_ten_queues(cursor, analyse=False)
        params = stamp_params("q3", "w", [1, 2, 3], datetime.now(UTC), limits, uuid.uuid4())
        cursor.execute("EXPLAIN " + LIMITED_STAMP, params)
        stamp = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Cond: (id = ANY" in stamp and "alkqueue_message_pkey" in stamp, stamp
    assert "alkqueue_pending_idx" not in stamp, stamp
