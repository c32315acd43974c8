"""Which enqueues send the wake-up NOTIFY (PostgreSQL, sql/postgresql/wake_pacing.py):
outside a transaction, one per queue per NOTIFY_WINDOW on a connection; inside one, and with
a unique key, always. Counted on a real LISTEN connection, up to a marker the test sends last."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test.utils import override_settings

from django_alkqueue.models import QueueMessage
from django_alkqueue.sql.postgresql import NOTIFY_CHANNEL
from django_alkqueue.sql.postgresql.wake_pacing import (
    FOLLOW_UP_SLACK,
    follow_up_delay,
    wake_due,
    wake_sent,
)

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

MARKER = "-- the test's marker --"
LONG = {"NOTIFY_WINDOW": 3600.0}  # no window runs out during a test
NONE = {"NOTIFY_WINDOW": 0.0}


@pytest.fixture
def listening() -> Iterator[Any]:
    """A LISTEN connection of its own on the test database, as a worker's listener has."""
    conn = connection.get_new_connection(connection.get_connection_params())
    conn.autocommit = True
    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
    yield conn
    conn.close()


def wake_ups(listening: Any) -> list[str]:
    """The payloads of the NOTIFYs sent so far. Notifications arrive in commit order, so the
    marker, sent now, comes after every one committed before it: no waiting on time."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, MARKER])
    payloads = []
    for notify in listening.notifies(timeout=10):
        if notify.payload == MARKER:
            return payloads
        payloads.append(notify.payload)
    raise AssertionError(f"the marker never came; got {payloads}")


@override_settings(ALKQUEUE=LONG)
def test_enqueues_outside_a_transaction_within_the_window_send_one_notify(q, listening):
    jobs = [q.enqueue(n) for n in range(3)]

    assert wake_ups(listening) == ["shop-emails"]
    assert QueueMessage.objects.filter(pk__in=[j.id for j in jobs]).count() == 3


@override_settings(ALKQUEUE=NONE)
def test_with_a_window_of_zero_every_enqueue_notifies(q, listening):
    for n in range(3):
        q.enqueue(n)

    assert wake_ups(listening) == ["shop-emails"] * 3


@override_settings(ALKQUEUE=LONG)
def test_the_window_is_kept_per_queue(make_queue, listening):
    make_queue("shop-emails").enqueue(1)
    make_queue("shop-webhooks").enqueue(2)
    make_queue("shop-emails").enqueue(3)

    assert wake_ups(listening) == ["shop-emails", "shop-webhooks"]


@override_settings(ALKQUEUE=LONG)
def test_an_enqueue_inside_a_transaction_notifies_within_the_window(q, listening):
    q.enqueue(1)
    with transaction.atomic():
        q.enqueue(2)

    assert wake_ups(listening) == ["shop-emails"] * 2


@override_settings(ALKQUEUE=LONG)
def test_an_enqueue_inside_a_transaction_starts_no_window(q, listening):
    with transaction.atomic():
        q.enqueue(1)
    q.enqueue(2)  # the NOTIFY above went out at a commit no window was counted from

    assert wake_ups(listening) == ["shop-emails"] * 2


@override_settings(ALKQUEUE=LONG)
def test_a_rolled_back_enqueue_notifies_nothing_and_starts_no_window(q, listening):
    with pytest.raises(RuntimeError), transaction.atomic():
        q.enqueue(1)
        raise RuntimeError("the view failed")
    q.enqueue(2)

    assert wake_ups(listening) == ["shop-emails"]


@override_settings(ALKQUEUE=LONG)
def test_an_enqueue_with_a_unique_key_notifies_within_the_window(q, listening):
    q.enqueue(1)
    q.enqueue(2, unique_key="order-7")

    assert wake_ups(listening) == ["shop-emails"] * 2


@override_settings(ALKQUEUE=LONG)
def test_enqueue_many_notifies_within_the_window(q, listening):
    q.enqueue(1)
    q.enqueue_many([2, 3])

    assert wake_ups(listening) == ["shop-emails"] * 2


def test_the_window_counts_from_the_last_notify_that_committed():
    main = connections["default"]  # the wrapper the dialect gets, not the per-thread proxy
    main.ensure_connection()
    wake_sent(main, "shop-emails", 100.0)

    assert not wake_due(main, "shop-emails", 5.0, 104.9, autocommit=True)
    assert wake_due(main, "shop-emails", 5.0, 105.0, autocommit=True)
    assert wake_due(main, "shop-reports", 5.0, 101.0, autocommit=True)  # never notified


def test_a_worker_follows_a_notify_up_once_the_window_and_its_slack_have_passed():
    assert follow_up_delay(0.005) == pytest.approx(0.005 + FOLLOW_UP_SLACK)
    assert follow_up_delay(0.0) is None  # every enqueue notifies: nothing to follow up
