"""The worker's LISTEN session (PostgreSQL, sql/postgresql/listen.py): a wait returns as soon
as a wake-up comes, not at its timeout, so an idle worker starts a new job at once."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from django_alkqueue.sql import dialect_for
from django_alkqueue.sql.postgresql import NOTIFY_CHANNEL

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]


def notify_later(payload: str, after: float) -> threading.Thread:
    def send() -> None:
        time.sleep(after)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, payload])
        connection.close()

    thread = threading.Thread(target=send)
    thread.start()
    return thread


def test_a_wait_returns_with_the_first_wake_up_long_before_its_timeout():
    with dialect_for(connection).listen(connection) as wait:
        sender = notify_later("shop-emails", after=0.2)
        started = time.monotonic()

        woken = wait(30.0)

        elapsed = time.monotonic() - started
        sender.join()
    assert woken == ["shop-emails"]
    assert elapsed < 15.0  # not the 30 s timeout: the wait ends with the packet that came


def test_a_wait_with_no_wake_up_returns_nothing_at_its_timeout():
    with dialect_for(connection).listen(connection) as wait:
        assert wait(0.2) == []
