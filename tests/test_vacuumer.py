"""The leader's VACUUM of the live table once PostgreSQL counts enough dead row versions."""

from __future__ import annotations

import pytest
from django.db import connection, connections
from django.test.utils import override_settings

from django_alkqueue.clock import system_clock
from django_alkqueue.queues import ack_handles
from django_alkqueue.sql import dialect_for
from django_alkqueue.worker.vacuumer import VacuumService
from tests.conftest import empty_statistics_with_pages, fill_ten_queues, wait_until

# VACUUM cannot run inside a transaction block: no test-wrapping transaction here.
pytestmark = pytest.mark.django_db(transaction=True)


def _churn(q, jobs: int) -> None:
    """Enqueue, claim and ack `jobs` jobs: two dead row versions each."""
    q.enqueue_many(range(jobs))
    ack_handles(q.claim("w", jobs), q.using)


def _flush_own_statistics() -> None:
    # This session's counts reach the shared statistics when it next goes idle.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")


def _dead_tuples() -> int:
    return dialect_for(connection).dead_tuples(connection) or 0


def _manual_vacuums() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'alkqueue_message'"
        )
        return int(cursor.fetchone()[0])


@pytest.fixture
def vacuums_before(q) -> int:
    """300 jobs churned and counted by PostgreSQL; returns the manual vacuums so far."""
    _churn(q, 300)
    _flush_own_statistics()
    wait_until(lambda: _dead_tuples() >= 300)
    return _manual_vacuums()


@pytest.mark.postgres_only
def test_the_live_table_is_vacuumed_once_dead_rows_pass_the_threshold(vacuums_before):
    with override_settings(ALKQUEUE={"VACUUM_DEAD_TUPLES": 300}):
        assert VacuumService("default").run_once(system_clock()) is True
    wait_until(lambda: _manual_vacuums() == vacuums_before + 1)


@pytest.mark.postgres_only
def test_below_the_threshold_the_table_is_left_alone(vacuums_before):
    with override_settings(ALKQUEUE={"VACUUM_DEAD_TUPLES": 100_000}):
        assert VacuumService("default").run_once(system_clock()) is False
    assert _manual_vacuums() == vacuums_before


@pytest.mark.postgres_only
def test_vacuum_dead_tuples_none_never_vacuums(vacuums_before):
    with override_settings(ALKQUEUE={"VACUUM_DEAD_TUPLES": None}):
        assert VacuumService("default").run_once(system_clock()) is False
    assert _manual_vacuums() == vacuums_before


@pytest.mark.postgres_only
def test_while_the_snapshot_that_held_back_the_last_vacuum_is_open_no_vacuum_runs(q):
    held = connections.create_connection("default")
    leader = VacuumService("default")
    try:
        held.set_autocommit(False)
        with held.cursor() as cursor:  # a report's snapshot: no transaction id of its own
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("SELECT 1")
        _churn(q, 300)  # rows the held snapshot may still see
        _flush_own_statistics()
        wait_until(lambda: _dead_tuples() >= 300)
        vacuums = _manual_vacuums()
        with override_settings(ALKQUEUE={"VACUUM_DEAD_TUPLES": 300}):
            assert leader.run_once(system_clock()) is True
            wait_until(lambda: _manual_vacuums() == vacuums + 1)
            assert _dead_tuples() >= 300  # kept for the held snapshot
            assert leader.run_once(system_clock()) is False
            held.rollback()
            assert leader.run_once(system_clock()) is True
        wait_until(lambda: _manual_vacuums() == vacuums + 2)
    finally:
        held.rollback()
        held.close()


def _statistics_say_empty() -> bool:
    _flush_own_statistics()
    return dialect_for(connection).statistics_say_empty(connection)


@pytest.mark.postgres_only
def test_statistics_that_say_empty_while_the_table_holds_rows_are_taken_again(q, frozen_statistics):
    def planner_rows() -> float:
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'alkqueue_message'")
            return float(cursor.fetchone()[0])

    with connection.cursor() as cursor:
        empty_statistics_with_pages(cursor)
        fill_ten_queues(cursor, analyse=False)
    wait_until(_statistics_say_empty, what="the statistics to say empty over a full table")
    assert planner_rows() == 0

    with override_settings(ALKQUEUE={"VACUUM_DEAD_TUPLES": 10**9}):
        VacuumService("default").run_once(system_clock())

    assert planner_rows() > 50_000
    assert not dialect_for(connection).statistics_say_empty(connection)


def test_sqlite_has_nothing_to_vacuum(q, is_postgres):
    if is_postgres:
        pytest.skip("SQLite behaviour")
    _churn(q, 10)
    with override_settings(ALKQUEUE={"VACUUM_DEAD_TUPLES": 1}):
        assert VacuumService("default").run_once(system_clock()) is False
