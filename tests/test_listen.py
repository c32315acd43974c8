"""The worker's LISTEN session (PostgreSQL, sql/postgresql/listen.py): a wait returns as soon
as a wake-up comes, not at its timeout, so an idle worker starts a new job at once."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from django_alkqueue.sql import dialect_for
from django_alkqueue.sql.postgresql import NOTIFY_CHANNEL
from tests.conftest import wait_until

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


def _sessions_named(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name])
        return cursor.fetchone()[0]


def test_the_listen_session_connects_with_the_databases_settings_and_closes_after(monkeypatch):
    # psycopg.connect() from NAME, USER, HOST ... and the OPTIONS libpq takes; Django's own
    # OPTIONS (server_side_binding here) stay out, and the session ends with the block.
    connection.ensure_connection()  # Django's own session keeps its settings
    options = {**connection.settings_dict.get("OPTIONS", {}), "server_side_binding": False,
               "application_name": "alk-listen-test"}  # fmt: skip
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", options)
    with dialect_for(connection).listen(connection) as wait:
        assert wait(0.0) == []
        assert _sessions_named("alk-listen-test") == 1
    wait_until(lambda: _sessions_named("alk-listen-test") == 0, what="the session closed")
