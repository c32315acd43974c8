"""The health checks of the overview: each judgement on made-up catalog rows, and (on
PostgreSQL) the catalog reads themselves, including a real long transaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections

from django_alkqueue.reports import database_health
from django_alkqueue.sql import dialect_for

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def table(name="alkqueue_message", dead=0, vacuumed=None):
    return {"name": name, "live": 10, "dead": dead, "vacuumed": vacuumed, "autovacuums": 3}


def session(pid=42, age=1.0, xmin=10):
    return {
        "pid": pid,
        "user": "app",
        "application": "psql",
        "backend_type": "client backend",
        "state": "idle in transaction",
        "xact_age": age,
        "xmin_age": xmin,
        "query": "SELECT 1",
    }


def slot(name="standby", active=True, xmin=None):
    return {
        "name": name,
        "type": "physical",
        "active": active,
        "xmin_age": xmin,
        "catalog_xmin_age": None,
    }


def test_dead_tuples_under_the_threshold_are_fine():
    assert (
        database_health.judge_tables(
            [table(dead=database_health.DEAD_TUPLES_WARN - 1)], NOW
        ).warning
        is None
    )


def test_dead_tuples_over_the_threshold_warn_with_the_last_vacuum():
    check = database_health.judge_tables(
        [table(dead=database_health.DEAD_TUPLES_WARN, vacuumed=NOW - timedelta(hours=2))], NOW
    )
    assert "alkqueue_message has 50,000 dead tuples (last vacuum 2 h 0 min ago)" in check.warning


def test_a_transaction_open_past_the_threshold_names_its_session():
    young = database_health.judge_sessions([session(age=database_health.OLD_TRANSACTION_WARN - 1)])
    assert young.warning is None
    old = database_health.judge_sessions([session(pid=7, age=database_health.OLD_TRANSACTION_WARN)])
    assert "Session pid 7 (app, psql) has had a transaction open for 5 min" in old.warning
    assert "pg_terminate_backend(7)" in old.warning


def test_the_session_holding_back_vacuum_is_named_in_the_status():
    check = database_health.judge_sessions(
        [session(pid=1, xmin=5), session(pid=2, age=None, xmin=900)]
    )
    assert "vacuum is held back by pid 2 (900 xids)" in check.status


def test_no_open_transaction_is_fine():
    check = database_health.judge_sessions([])
    assert (check.status, check.warning) == ("no open transaction", None)


def test_an_inactive_slot_holding_xmin_warns():
    assert database_health.judge_slots([slot(active=True, xmin=10)]).warning is None
    assert database_health.judge_slots([slot(active=False, xmin=None)]).warning is None
    check = database_health.judge_slots([slot(name="old", active=False, xmin=10)])
    assert "Replication slot old (inactive) holds xmin back by 10" in check.warning


def test_an_active_slot_far_behind_warns():
    check = database_health.judge_slots([slot(xmin=database_health.SLOT_XMIN_AGE_WARN)])
    assert "pg_drop_replication_slot('standby')" in check.warning


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_the_catalog_reads_run_on_postgresql():
    checks = database_health.run_checks("default", NOW)
    assert [c.title for c in checks] == [
        "Dead tuples and autovacuum",
        "Oldest transaction",
        "Replication slots",
        "Claims of stale workers",
    ]
    assert {row[0] for row in checks[0].rows} == {"alkqueue_deadletter", "alkqueue_message"}


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_real_long_transaction_is_found(monkeypatch):
    monkeypatch.setattr(database_health, "OLD_TRANSACTION_WARN", 0.0)
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), txid_current()")
            pid = cursor.fetchone()[0]
        check = database_health.judge_sessions(dialect_for(connection).open_sessions(connection))
        assert f"Session pid {pid}" in check.warning
        assert str(pid) in [row[0] for row in check.rows]
    finally:
        other.rollback()
        other.close()
    assert connection.vendor == "postgresql"


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_held_snapshot_that_wrote_nothing_is_named_as_holding_vacuum_back():
    """A report's REPEATABLE READ snapshot pins the horizon with no transaction id of its own
    (pg_stat_activity.backend_xmin only): the status still names its session."""
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        check = database_health.judge_sessions(dialect_for(connection).open_sessions(connection))
        assert f"vacuum is held back by pid {pid} (" in check.status
    finally:
        other.rollback()
        other.close()
