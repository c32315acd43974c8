"""Uniqueness over a window (issue 52): `unique_for` keeps a unique key taken after its job
finished; within the window an enqueue writes nothing and returns the live holder or None."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction

from django_alkqueue import InvalidOption, enqueue, operations, queue
from django_alkqueue.models import QueueMessage, UniqueWindow
from django_alkqueue.sql.unique_windows import LOCK
from django_alkqueue.worker.maintenance import SweepService
from tests.conftest import run_threads

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


def test_the_first_enqueue_writes_a_job_and_its_window(q, clock):
    job = q.enqueue({"user": 42}, unique_key="digest:42", unique_for=HOUR)
    assert job is not None
    assert job.unique_key == "digest:42"
    window = UniqueWindow.objects.get(queue=q.name, unique_key="digest:42")
    assert (window.job_id, window.taken_at, window.lapses_at) == (
        job.id,
        clock.now,
        clock.now + HOUR,
    )


def test_within_the_window_a_live_holder_is_returned_as_it_is_now(q, clock):
    first = q.enqueue({"v": 1}, unique_key="k", unique_for=HOUR)
    clock.advance(60)
    q.claim("w")
    again = q.enqueue({"v": 2}, unique_key="k", unique_for=HOUR)
    assert again is not None
    assert again.id == first.id
    assert again.state == "claimed"
    assert QueueMessage.objects.filter(queue=q.name).count() == 1


@pytest.mark.parametrize("finish", ["ack", "fail", "cancel"])
def test_within_the_window_a_finished_holder_gives_none_and_nothing_is_written(q, clock, finish):
    first = q.enqueue(1, unique_key="k", unique_for=HOUR)
    if finish == "cancel":
        assert q.cancel(first.id) is True
    else:
        assert getattr(q.claim_one("w"), finish)() is True
    clock.advance(59 * 60)
    assert q.enqueue(2, unique_key="k", unique_for=HOUR) is None
    assert QueueMessage.objects.filter(queue=q.name).count() == 0
    assert UniqueWindow.objects.get(queue=q.name, unique_key="k").job_id == first.id


def test_once_the_window_lapses_the_key_is_free_and_a_new_window_starts(q, clock):
    first = q.enqueue(1, unique_key="k", unique_for=HOUR)
    q.claim_one("w").ack()
    clock.advance(3600)
    second = q.enqueue(2, unique_key="k", unique_for=HOUR)
    assert second is not None and second.id != first.id
    window = UniqueWindow.objects.get(queue=q.name, unique_key="k")
    assert (window.job_id, window.lapses_at) == (second.id, clock.now + HOUR)


def test_a_live_holder_past_its_window_still_holds_the_key_as_unique_key_does(q, clock):
    first = q.enqueue(1, unique_key="k", unique_for=HOUR, delay=7200)
    clock.advance(3601)
    again = q.enqueue(2, unique_key="k", unique_for=HOUR)
    assert again is not None and again.id == first.id


def test_without_unique_for_the_key_is_free_once_the_job_finished(q, clock):
    q.enqueue(1, unique_key="k", unique_for=HOUR)
    q.claim_one("w").ack()
    assert q.enqueue(2, unique_key="k") is not None
    assert QueueMessage.objects.filter(queue=q.name).count() == 1


def test_windows_are_per_queue(make_queue):
    a = make_queue("a").enqueue(1, unique_key="k", unique_for=HOUR)
    make_queue("a").claim_one("w").ack()
    b = make_queue("b").enqueue(1, unique_key="k", unique_for=HOUR)
    assert a is not None and b is not None


def test_a_rolled_back_enqueue_leaves_no_window(q, clock):
    with pytest.raises(RuntimeError), transaction.atomic():
        q.enqueue(1, unique_key="k", unique_for=HOUR)
        raise RuntimeError("the view failed")
    assert UniqueWindow.objects.count() == 0
    assert q.enqueue(2, unique_key="k", unique_for=HOUR) is not None


def test_the_shortcut_forwards_unique_for(clock):
    first = enqueue("shortcut", 1, unique_key="k", unique_for=HOUR)
    assert first is not None
    assert UniqueWindow.objects.get(queue="shortcut").job_id == first.id


def test_the_leaders_sweep_deletes_lapsed_windows_only(make_queue, clock):
    q = make_queue("swept")
    q.enqueue(1, unique_key="old", unique_for=timedelta(minutes=5))
    q.enqueue(2, unique_key="new", unique_for=HOUR)
    SweepService("default").run_once(clock.now + timedelta(minutes=10))
    assert list(UniqueWindow.objects.values_list("unique_key", flat=True)) == ["new"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unique_for": HOUR}, "unique_for needs a unique_key"),
        ({"unique_key": "k", "unique_for": 0}, "unique_for"),
        ({"unique_key": "k", "unique_for": -5}, "unique_for"),
        ({"unique_key": "k", "unique_for": "1h"}, "unique_for"),
        ({"unique_key": "k", "unique_for": True}, "unique_for"),
        ({"unique_key": "k", "unique_for": HOUR, "after": []}, "after"),
    ],
)
def test_bad_unique_for_is_refused_and_nothing_is_written(q, options, message):
    with pytest.raises(InvalidOption, match=message):
        q.enqueue(1, **options)
    assert QueueMessage.objects.count() == 0
    assert UniqueWindow.objects.count() == 0


def test_enqueue_many_with_unique_for_is_refused(q):
    with pytest.raises(InvalidOption, match="enqueue_many"):
        q.enqueue_many([1, 2], unique_key="k", unique_for=HOUR)
    assert QueueMessage.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_of_one_key_in_a_window_create_one_job():
    results: list[int | None] = []

    def enqueue_some(i: int) -> None:
        q = queue("windowed")
        for n in range(4):
            job = q.enqueue({"i": i, "n": n}, unique_key="k", unique_for=HOUR)
            results.append(None if job is None else job.id)
            if n == 1 and (handle := q.claim_one(f"w{i}")) is not None:
                handle.ack()  # the holder finishes mid-burst: later ones get None

    run_threads(8, enqueue_some)
    written = {job_id for job_id in results if job_id is not None}
    assert len(written) == 1
    assert UniqueWindow.objects.get(queue="windowed").job_id in written


@pytest.mark.postgres_only
def test_the_window_is_locked_through_its_unique_index():
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO alkqueue_uniquewindow (queue, unique_key, job_id, taken_at, lapses_at) "
            "SELECT 'q', 'k' || i, i, now(), now() FROM generate_series(1, 20000) AS i"
        )
        cursor.execute("ANALYZE alkqueue_uniquewindow")
        cursor.execute("EXPLAIN " + LOCK, ["q", "k7"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "alkqueue_unique_window_key" in plan, plan


def test_the_sweep_operation_deletes_lapsed_windows(q, clock):
    q.enqueue(1, unique_key="k", unique_for=60)
    operations.sweep_everywhere("default", clock.now + timedelta(seconds=59))
    assert UniqueWindow.objects.count() == 1
    operations.sweep_everywhere("default", clock.now + timedelta(seconds=60))
    assert UniqueWindow.objects.count() == 0
