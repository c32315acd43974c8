"""The async API (docs/queues.md, "From async code"): aenqueue, aenqueue_many, aget_job,
acancel, arequeue and django_alkqueue.aenqueue do what their sync twins do, from a coroutine,
and async views enqueue through them."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

import django_alkqueue
from django_alkqueue import InvalidOption, queue
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.shop.models import Order

pytestmark = pytest.mark.django_db(transaction=True)


def run(coroutine_function, *args, **kwargs):
    """Run a coroutine function as an async view would be run: from sync code through
    async_to_sync, so its sync_to_async calls come back to this thread and its connection."""
    return async_to_sync(coroutine_function)(*args, **kwargs)


def test_aenqueue_writes_a_job_that_aget_job_reads_back():
    emails = queue("shop-emails")

    job = run(emails.aenqueue, {"to": "a@example.com"}, priority=3)

    assert QueueMessage.objects.get(id=job.id).priority == 3
    assert run(emails.aget_job, job.id).payload == {"to": "a@example.com"}


def test_aenqueue_many_writes_every_job():
    jobs = run(queue("shop-emails").aenqueue_many, [{"n": n} for n in range(5)])

    assert sorted(QueueMessage.objects.values_list("id", flat=True)) == [j.id for j in jobs]


def test_acancel_removes_a_live_job():
    emails = queue("shop-emails")
    job = emails.enqueue({})

    assert run(emails.acancel, job.id) is True
    assert not QueueMessage.objects.filter(id=job.id).exists()


def test_arequeue_brings_a_dead_letter_back():
    emails = queue("shop-emails")
    job = emails.enqueue({})
    (handle,) = emails.claim("w1")
    handle.fail("broken")

    requeued = run(emails.arequeue, job.id)

    assert requeued is not None and requeued.id == job.id
    assert not DeadLetter.objects.filter(job_id=job.id).exists()


def test_the_module_level_aenqueue_takes_queue_and_job_options():
    job = run(django_alkqueue.aenqueue, "shop-emails", {"x": 1}, lease=12, priority=2)

    row = QueueMessage.objects.get(id=job.id)
    assert (row.queue, row.lease, row.priority) == ("shop-emails", 12, 2)


def test_bad_options_raise_invalid_option_and_write_nothing():
    with pytest.raises(InvalidOption):
        run(queue("shop-emails").aenqueue, {}, priority="high")

    assert not QueueMessage.objects.exists()


def test_an_async_view_saves_its_order_and_enqueues_in_one_transaction():
    response = run(AsyncClient().post, "/orders/async/", {"email": "b@example.com"})

    body = response.json()
    assert Order.objects.filter(pk=body["order"]).exists()
    assert QueueMessage.objects.filter(id=body["job"], queue="shop-emails").exists()


def test_an_async_view_enqueues_with_aenqueue():
    response = run(AsyncClient().post, "/ping/async/", {"email": "ops@example.com"})

    assert QueueMessage.objects.get(id=response.json()["job"]).queue == "shop-emails"


def test_aenqueue_forwards_a_debounce_key_and_updates_in_place():
    docs = queue("reindex")
    first = run(docs.aenqueue, {"v": 1}, debounce_key="doc-7", debounce=5)
    second = run(django_alkqueue.aenqueue, "reindex", {"v": 2}, debounce_key="doc-7", debounce=5)

    assert second.id == first.id
    assert QueueMessage.objects.get(id=first.id).payload == {"v": 2}


def test_aenqueue_forwards_unique_for_and_gives_none_once_the_holder_finished():
    digests = queue("digests")
    first = run(digests.aenqueue, 1, unique_key="digest:42", unique_for=3600)
    assert first is not None
    digests.claim_one("w").ack()

    assert run(django_alkqueue.aenqueue, "digests", 2, unique_key="digest:42",
               unique_for=3600) is None  # fmt: skip
    assert not QueueMessage.objects.filter(queue="digests").exists()
