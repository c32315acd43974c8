"""The worker's write of its consumers to the Consumer table: a re-sync stamps updated_at."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_alkqueue.consumers import registry
from django_alkqueue.models import Consumer
from django_alkqueue.worker.consumer_table import sync_consumers

pytestmark = pytest.mark.django_db


def test_a_re_sync_stamps_updated_at(clock):
    emails = registry.get("shop-emails")
    sync_consumers([emails], "default", takeover=False, now=clock())
    Consumer.objects.filter(queue="shop-emails").update(updated_at=clock() - timedelta(days=3))
    clock.advance(60)

    sync_consumers([emails], "default", takeover=False, now=clock())

    assert Consumer.objects.get(queue="shop-emails").updated_at == clock.now


def test_a_takeover_stamps_updated_at(clock):
    Consumer.objects.create(queue="shop-emails", handler="billing.consumers.send_invoice",
                            lease=30, max_attempts=5)  # fmt: skip
    Consumer.objects.filter(queue="shop-emails").update(updated_at=clock() - timedelta(days=3))

    sync_consumers([registry.get("shop-emails")], "default", takeover=True, now=clock())

    row = Consumer.objects.get(queue="shop-emails")
    assert row.handler == "testproject.shop.consumers.send_email"
    assert row.updated_at == clock.now
