"""Connection hygiene between jobs (worker/connections.py): a healthy connection stays open
between jobs, a broken one is closed before the next job, and every alias the thread uses
is checked, however late it first uses it."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest
from django.db import DatabaseError, connections

from django_alkqueue.worker.connections import ThreadConnections
from tests.conftest import run_threads

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "other"])


def _in_a_thread(body: Callable[[], None]) -> None:
    run_threads(1, lambda _: body())


def _break(alias: str) -> None:
    """End the alias's server process, then fail a query on it, as a restart would."""
    connection = connections[alias]
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with connections["default" if alias != "default" else "other"].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(DatabaseError), connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert connection.errors_occurred


def test_a_healthy_connection_stays_open_after_a_job():
    def body() -> None:
        checks = ThreadConnections()
        connection = connections["default"]
        connection.ensure_connection()
        checks.recycle()
        assert connection.connection is not None

    _in_a_thread(body)


@pytest.mark.postgres_only
def test_a_broken_connection_is_closed_after_a_job():
    def body() -> None:
        checks = ThreadConnections()
        _break("default")
        checks.recycle()
        assert connections["default"].connection is None

    _in_a_thread(body)


@pytest.mark.postgres_only
def test_an_alias_a_thread_first_uses_after_its_first_check_is_checked_too():
    def body() -> None:
        checks = ThreadConnections()
        checks.recycle()  # nothing used yet
        _break("other")
        checks.recycle()
        assert connections["other"].connection is None

    _in_a_thread(body)


@pytest.mark.skipif(connections["default"].vendor != "mysql", reason="KILL is MariaDB's")
def test_a_mariadb_connection_whose_server_session_ended_is_closed_after_a_job():
    def body() -> None:
        checks = ThreadConnections()
        connection = connections["default"]
        connection.ensure_connection()
        with connections["other"].cursor() as cursor:
            cursor.execute("KILL %s", [connection.connection.thread_id()])
        with pytest.raises(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks.recycle()
        assert connection.connection is None

    _in_a_thread(body)


def test_a_connection_whose_query_failed_but_whose_session_lives_stays_open():
    def body() -> None:
        checks = ThreadConnections()
        connection = connections["default"]
        with pytest.raises(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_here")
        checks.recycle()
        assert connection.connection is not None

    _in_a_thread(body)


def test_a_dropped_thread_connections_takes_no_other_wrapper_off_its_connections():
    # The garbage collector frees a dropped ThreadConnections at any moment, perhaps while a
    # hot statement's own wrapper is on the connection (sql/postgresql/session.py): that
    # wrapper must stay, or the statement returns a cursor instead of its rows.
    def body() -> None:
        dropped = ThreadConnections()
        dropped.cycle = dropped  # type: ignore[attr-defined]  # freed by gc.collect() only
        del dropped
        seen: list[str] = []

        def wrapper(execute: Callable[..., object], sql: str, *args: object) -> object:
            seen.append(sql)
            return execute(sql, *args)

        connection = connections["default"]
        connection.ensure_connection()  # MariaDB's start-up statements pass the wrappers too
        with connection.execute_wrapper(wrapper):
            gc.collect()
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        assert seen == ["SELECT 1"]

    _in_a_thread(body)
