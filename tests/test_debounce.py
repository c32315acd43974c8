"""Debounce (issue 52): a burst of enqueues with one debounce key leaves one unclaimed job,
updated in place, run once the burst is quiet for `debounce` or `debounce_max` after it began."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_alkqueue import InvalidOption, queue, signals
from django_alkqueue.jobs import Job
from django_alkqueue.limits import Limits
from django_alkqueue.models import QueueMessage
from django_alkqueue.sql.debounce_rows import UPDATE_IN_PLACE
from tests.conftest import fill_ten_queues, run_threads

pytestmark = pytest.mark.django_db


@pytest.fixture
def debounced():
    seen: list[Job] = []

    def receiver(sender, job, **kwargs):
        seen.append(job)

    signals.job_debounced.connect(receiver)
    yield seen
    signals.job_debounced.disconnect(receiver)


@pytest.fixture
def enqueued():
    seen: list[Job] = []

    def receiver(sender, job, **kwargs):
        seen.append(job)

    signals.job_enqueued.connect(receiver)
    yield seen
    signals.job_enqueued.disconnect(receiver)


def test_the_first_enqueue_writes_a_job_scheduled_debounce_ahead(q, clock):
    job = q.enqueue({"doc": 7}, debounce_key="doc-7", debounce=5)
    assert job.state == "scheduled"
    assert job.run_at == clock.now + timedelta(seconds=5)
    assert q.get_job(job.id).run_at == job.run_at


def test_a_second_enqueue_updates_the_job_in_place_and_returns_it(q, clock):
    first = q.enqueue({"v": 1}, debounce_key="doc-7", debounce=5)
    clock.advance(3)
    second = q.enqueue({"v": 2}, debounce_key="doc-7", debounce=timedelta(seconds=5))
    assert second.id == first.id
    assert second.payload == {"v": 2}
    assert second.run_at == clock.now + timedelta(seconds=5)
    stored = q.get_job(first.id)
    assert (stored.payload, stored.run_at) == ({"v": 2}, clock.now + timedelta(seconds=5))
    assert stored.enqueued_at == first.enqueued_at
    assert QueueMessage.objects.filter(queue=q.name).count() == 1


def test_a_pending_job_is_updated_in_place_too(q, clock):
    first = q.enqueue(1, debounce_key="k", debounce=5)
    clock.advance(10)
    assert q.get_job(first.id).state == "pending"
    assert q.enqueue(2, debounce_key="k", debounce=5).id == first.id


def test_a_claimed_job_does_not_count(q, clock):
    first = q.enqueue({"v": 1}, debounce_key="k", debounce=5)
    clock.advance(6)
    [handle] = q.claim("w")
    second = q.enqueue({"v": 2}, debounce_key="k", debounce=5)
    assert second.id != first.id
    assert second.state == "scheduled"
    assert handle.job.payload == {"v": 1}
    assert q.get_job(first.id).payload == {"v": 1}
    assert QueueMessage.objects.get(id=first.id).debounce_key is None
    # The new job is the key's open one now: the next enqueue updates it.
    assert q.enqueue({"v": 3}, debounce_key="k", debounce=5).id == second.id


def test_a_retried_job_does_not_take_its_key_back(q, clock):
    first = q.enqueue(1, debounce_key="k", debounce=5)
    clock.advance(6)
    [handle] = q.claim("w")
    second = q.enqueue(2, debounce_key="k", debounce=5)
    assert handle.retry(error="boom") is True
    assert q.get_job(first.id).state in ("pending", "scheduled")
    assert q.enqueue(3, debounce_key="k", debounce=5).id == second.id


def test_a_released_job_does_not_collide_with_the_new_one(q, clock):
    q.enqueue(1, debounce_key="k", debounce=5)
    clock.advance(6)
    [handle] = q.claim("w")
    second = q.enqueue(2, debounce_key="k", debounce=5)
    assert handle.release() is True
    assert q.enqueue(3, debounce_key="k", debounce=5).id == second.id


def test_debounce_max_caps_run_at_after_the_bursts_first_enqueue(q, clock):
    start = clock.now
    first = q.enqueue(0, debounce_key="k", debounce=5, debounce_max=12)
    for i in range(1, 6):
        clock.advance(4)
        job = q.enqueue(i, debounce_key="k", debounce=5, debounce_max=12)
        assert job.id == first.id
        assert job.run_at == min(clock.now + timedelta(seconds=5), start + timedelta(seconds=12))
    assert q.get_job(first.id).run_at == start + timedelta(seconds=12)


def test_debounce_max_below_debounce_schedules_the_first_job_at_the_cap(q, clock):
    job = q.enqueue(0, debounce_key="k", debounce=30, debounce_max=10)
    assert job.run_at == clock.now + timedelta(seconds=10)


def test_debounce_keys_are_per_queue(make_queue):
    a = make_queue("a").enqueue(1, debounce_key="k", debounce=5)
    b = make_queue("b").enqueue(1, debounce_key="k", debounce=5)
    assert a.id != b.id


def test_job_debounced_is_sent_for_an_update_in_place_and_job_enqueued_for_a_new_job(
    q, clock, debounced, enqueued
):
    first = q.enqueue(1, debounce_key="k", debounce=5)
    second = q.enqueue(2, debounce_key="k", debounce=5)
    assert [job.id for job in enqueued] == [first.id]
    assert debounced == [second]
    assert debounced[0].payload == 2


def test_the_update_rolls_back_with_the_callers_transaction(q, clock):
    first = q.enqueue({"v": 1}, debounce_key="k", debounce=5)
    with pytest.raises(RuntimeError), transaction.atomic():
        q.enqueue({"v": 2}, debounce_key="k", debounce=5)
        raise RuntimeError("the view failed")
    stored = q.get_job(first.id)
    assert (stored.payload, stored.run_at) == ({"v": 1}, first.run_at)


def test_a_concurrency_key_is_stamped_on_a_new_debounced_job(q):
    job = q.enqueue(1, debounce_key="k", debounce=5, concurrency_key="tenant-1")
    assert job.concurrency_key == "tenant-1"
    assert QueueMessage.objects.get(id=job.id).concurrency_key == "tenant-1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce_key": "k"}, "both or neither"),
        ({"debounce": 5}, "both or neither"),
        ({"debounce_max": 5}, "debounce_max needs"),
        ({"debounce_key": "k", "debounce": 0}, "debounce"),
        ({"debounce_key": "k", "debounce": -1}, "debounce"),
        ({"debounce_key": "k", "debounce": True}, "debounce"),
        ({"debounce_key": "k", "debounce": "5"}, "debounce"),
        ({"debounce_key": "", "debounce": 5}, "debounce_key"),
        ({"debounce_key": "x" * 256, "debounce": 5}, "debounce_key"),
        ({"debounce_key": "a\x00b", "debounce": 5}, "debounce_key"),
        ({"debounce_key": 7, "debounce": 5}, "debounce_key"),
        ({"debounce_key": "k", "debounce": 5, "debounce_max": 0}, "debounce_max"),
        ({"debounce_key": "k", "debounce": 5, "delay": 3}, "delay"),
        ({"debounce_key": "k", "debounce": 5, "unique_key": "u"}, "unique_key"),
        ({"debounce_key": "k", "debounce": 5, "after": []}, "after"),
    ],
)
def test_bad_debounce_options_are_refused_and_nothing_is_written(q, options, message):
    with pytest.raises(InvalidOption, match=message):
        q.enqueue(1, **options)
    assert QueueMessage.objects.count() == 0


def test_a_bad_option_leaves_the_open_job_untouched(q, clock):
    first = q.enqueue({"v": 1}, debounce_key="k", debounce=5)
    with pytest.raises(InvalidOption):
        q.enqueue({"v": 2}, debounce_key="k", debounce=-1)
    assert q.get_job(first.id).payload == {"v": 1}


@pytest.mark.parametrize("options", [{"debounce_key": "k", "debounce": 5}, {"debounce": 5},
                                     {"debounce_key": "k"}, {"debounce_max": 5}])  # fmt: skip
def test_enqueue_many_with_a_debounce_option_is_refused(q, options):
    with pytest.raises(InvalidOption, match="enqueue_many"):
        q.enqueue_many([1, 2], **options)
    assert QueueMessage.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_of_one_debounce_key_leave_one_unclaimed_job():
    ids: list[int] = []

    def enqueue_some(i: int) -> None:
        for n in range(5):
            ids.append(queue("burst").enqueue({"i": i, "n": n}, debounce_key="k", debounce=60).id)

    run_threads(8, enqueue_some)
    assert len(set(ids)) == 1
    assert QueueMessage.objects.filter(queue="burst").count() == 1


def test_a_claim_within_limits_clears_the_debounce_key_too(q, clock):
    first = q.enqueue(1, debounce_key="k", debounce=5)
    clock.advance(6)
    outcome = q.claim_within("w", 1, Limits(concurrency=5))
    assert [handle.job.id for handle in outcome.handles] == [first.id]
    assert QueueMessage.objects.get(id=first.id).debounce_key is None
    assert q.enqueue(2, debounce_key="k", debounce=5).id != first.id


@pytest.mark.postgres_only
def test_the_update_in_place_finds_its_row_by_the_debounce_key_index():
    with connection.cursor() as cursor:
        fill_ten_queues(cursor)
        cursor.execute("EXPLAIN " + UPDATE_IN_PLACE, ["{}", None, None, None, "q3", "k"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "alkqueue_open_debounce_key" in plan, plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.sqlite_only
def test_sqlite_finds_the_row_to_update_in_place_by_the_debounce_key_index():
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + UPDATE_IN_PLACE, ["{}", None, None, None, "q", "k"])
        plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
    assert "alkqueue_open_debounce_key" in plan, plan


@pytest.mark.django_db(transaction=True)
def test_enqueues_racing_claims_of_one_key_keep_at_most_one_unclaimed_job():
    """Claims clear the key while enqueues update or insert: on InnoDB two inserts of a key
    just cleared can deadlock, and the enqueue (outside any transaction) runs again."""
    enqueued: list[int] = []
    ran: list[int] = []

    def body(i: int) -> None:
        q = queue("racing")
        for n in range(25):
            if i == 0:
                ran.extend(handle.job.id for handle in q.claim("w", 5) if handle.ack())
            else:
                enqueued.append(q.enqueue({"i": i, "n": n}, debounce_key="k", debounce=0.001).id)

    run_threads(4, body)
    unclaimed = QueueMessage.objects.filter(queue="racing", claim_token__isnull=True)
    assert unclaimed.filter(debounce_key="k").count() <= 1
    assert set(ran) <= set(enqueued)
    assert len(enqueued) == 3 * 25


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    waits=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=8),
    debounce=st.integers(min_value=1, max_value=15),
    most=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
)
def test_run_at_is_the_last_enqueue_plus_debounce_capped_at_the_first_plus_debounce_max(
    make_queue, clock, waits, debounce, most
):
    """For any burst (gaps between enqueues, debounce, debounce_max), the one job's run_at is
    the last enqueue + debounce, never past the first + debounce_max."""
    with transaction.atomic():
        q = make_queue("burst-rule")
        start = clock.now
        ids = set()
        for wait in waits:
            clock.advance(wait)
            ids.add(q.enqueue(wait, debounce_key="k", debounce=debounce, debounce_max=most).id)
        expected = clock.now + timedelta(seconds=debounce)
        if most is not None:
            expected = min(expected, start + timedelta(seconds=waits[0] + most))
        assert len(ids) == 1
        assert q.get_job(ids.pop()).run_at == expected
        transaction.set_rollback(True)


def test_the_database_refuses_a_second_unclaimed_job_of_one_debounce_key(q, clock):
    first = q.enqueue(1, debounce_key="k", debounce=5)
    row = QueueMessage.objects.get(id=first.id)
    row.pk = None
    with pytest.raises(IntegrityError), transaction.atomic():
        row.save(force_insert=True)
    row.debounce_key = None  # without the key, any number
    row.save(force_insert=True)


def test_an_update_in_place_counts_the_expiry_from_the_latest_enqueue(q, clock):
    first = q.enqueue({"v": 1}, debounce_key="k", debounce=5, expires=60)
    clock.advance(61)  # expired, not yet swept: the claim passes it by
    second = q.enqueue({"v": 2}, debounce_key="k", debounce=5, expires=60)
    assert second.id == first.id
    assert second.expires_at == clock.now + timedelta(seconds=60)
    clock.advance(6)
    [handle] = q.claim("w")
    assert handle.job.payload == {"v": 2}
