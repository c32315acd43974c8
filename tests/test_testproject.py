"""The testproject's two ways to enqueue (a view's transaction, a post_save receiver), its
jobs run by the `alkqueue` fixture (django_alkqueue.testing), and `manage.py alk_status
--json` against the true counts."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from django_alkqueue import queue
from django_alkqueue.models import Consumer, DeadLetter, QueueMessage
from testproject.shop.models import HandlerRun, Order
from tests.workers import run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_order_view_saves_the_order_and_enqueues_its_receipt_email():
    response = Client().post("/orders/", {"email": "ada@example.com", "total_cents": "1200"})

    assert response.status_code == 200
    body = response.json()
    order = Order.objects.get(pk=body["order"])
    assert (order.customer_email, order.total_cents) == ("ada@example.com", 1200)
    email = QueueMessage.objects.get(pk=body["job"])
    assert email.queue == "shop-emails"
    assert email.payload == {"order": order.pk, "to": "ada@example.com", "template": "receipt"}
    assert email.claim_token is None and email.attempts == 0


def test_an_orders_receipt_and_invoice_jobs_run_when_the_test_drains_them(alkqueue):
    body = Client().post("/orders/", {"email": "dee@example.com"}).json()

    drained = alkqueue.drain(["shop-emails", "shop-reports"])

    assert drained.succeeded == 2
    assert set(HandlerRun.objects.values_list("queue", "job_id")) >= {("shop-emails", body["job"])}
    assert alkqueue.jobs("shop-emails") == alkqueue.jobs("shop-reports") == []


def test_saving_an_order_enqueues_its_invoice_report_from_the_post_save_receiver():
    order = Order.objects.create(customer_email="bob@example.com", total_cents=500)

    (report,) = QueueMessage.objects.filter(queue="shop-reports")
    assert report.payload == {"order": order.pk, "kind": "invoice"}
    assert not QueueMessage.objects.filter(queue="shop-emails").exists()  # only the view sends one

    order.total_cents = 600
    order.save()  # an update, not a creation: no second report
    assert QueueMessage.objects.filter(queue="shop-reports").count() == 1


def test_order_view_enqueues_both_the_email_and_the_report():
    body = Client().post("/orders/", {"email": "cy@example.com"}).json()

    assert sorted(QueueMessage.objects.values_list("queue", flat=True)) == [
        "shop-emails",
        "shop-reports",
    ]
    report = QueueMessage.objects.get(queue="shop-reports")
    assert report.payload == {"order": body["order"], "kind": "invoice"}


def test_failing_order_view_rolls_back_the_order_and_its_jobs():
    client = Client(raise_request_exception=False)

    response = client.post("/orders/fail/", {"email": "dee@example.com"})

    assert response.status_code == 500
    assert not Order.objects.exists()
    assert not QueueMessage.objects.exists()
    assert not DeadLetter.objects.exists()


def seed_every_state() -> dict[str, dict[str, object]]:
    """Jobs in every state on several queues; returns what alk_status must show per queue."""
    bounced = queue("shop-emails").enqueue({"n": 0})
    (handle,) = queue("shop-emails").claim("seeder:1", 1)
    assert handle.job.id == bounced.id
    handle.fail("bounced")  # emails: 1 dead
    queue("shop-emails").enqueue_many([{"n": n} for n in range(1, 4)])  # 3 pending
    queue("shop-emails").enqueue({"n": 4}, delay=3600)  # 1 scheduled
    queue("shop-reports").enqueue_many([{"n": n} for n in range(2)], delay=600)  # 2 scheduled
    queue("shop-webhooks").enqueue_many([{"n": n} for n in range(5)])
    claimed = queue("shop-webhooks").claim("seeder:1", 3)
    claimed[0].fail("gone")  # webhooks: 1 dead, 2 claimed, 2 pending
    Consumer.objects.create(
        queue="shop-noop",
        handler="testproject.shop.consumers.do_nothing",
        lease=30,
        max_attempts=5,
        paused=True,
    )
    counts = ("pending", "scheduled", "claimed", "dead")
    return {
        # No worker has served these: the handler is the one the code binds, not yet served.
        "shop-emails": dict(zip(counts, (3, 1, 0, 1), strict=True))
        | {"handler": "testproject.shop.consumers.send_email", "served": False},
        "shop-noop": dict(zip(counts, (0, 0, 0, 0), strict=True))
        | {"handler": "testproject.shop.consumers.do_nothing", "paused": True, "served": True},
        "shop-reports": dict(zip(counts, (0, 2, 0, 0), strict=True))
        | {"handler": "testproject.shop.consumers.build_report", "served": False},
        "shop-webhooks": dict(zip(counts, (2, 0, 2, 1), strict=True))
        | {"handler": "testproject.shop.consumers.deliver_webhook", "served": False},
    }


def true_counts(name: str) -> dict[str, int]:
    """The counts straight from the tables, independent of django_alkqueue.status."""
    from django.utils import timezone

    now = timezone.now()
    jobs = QueueMessage.objects.filter(queue=name)
    return {
        "pending": jobs.filter(claim_token__isnull=True, run_at__lte=now).count(),
        "scheduled": jobs.filter(claim_token__isnull=True, run_at__gt=now).count(),
        "claimed": jobs.filter(claim_token__isnull=False).count(),
        "dead": DeadLetter.objects.filter(queue=name).count(),
    }


def test_alk_status_json_matches_the_true_counts_per_queue():
    expected = seed_every_state()

    result = run_manage("alk_status", "--json")

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rows = {row["queue"]: row for row in data["queues"]}
    assert sorted(rows) == sorted(expected)
    for name, want in expected.items():
        row = rows[name]
        assert {k: row[k] for k in want} == want, name
        assert {k: row[k] for k in true_counts(name)} == true_counts(name), name
    assert rows["shop-emails"]["oldest_pending_age"] >= 0
    assert rows["shop-reports"]["oldest_pending_age"] == 0  # nothing pending there
    assert rows["shop-emails"]["paused"] is False and rows["shop-noop"]["paused"] is True
    assert data["workers"] == []
