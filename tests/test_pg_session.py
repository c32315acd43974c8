"""The hot statements on PostgreSQL: server-side binding, prepared once per connection,
Django's cursor kept where queries are watched, Django's exceptions either way."""

from __future__ import annotations

import asyncio
import datetime
import logging
import re
import threading

import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.core.signals import request_started
from django.db import DatabaseError, DataError, connection, connections, transaction
from django.db.utils import OperationalError, ProgrammingError
from django.test.utils import CaptureQueriesContext, override_settings

from django_alkqueue.models import QueueMessage
from django_alkqueue.sql.postgresql import statements
from django_alkqueue.sql.postgresql.session import behind_a_pooler, fetch_all, raw_statement
from tests.clocks import FakeClock
from tests.conftest import PLANNER_DEFAULTS, planner_settings

pytestmark = [pytest.mark.django_db, pytest.mark.postgres_only]


@pytest.fixture(autouse=True)
def every_enqueue_notifies(settings):
    """One enqueue statement, whatever the time between two enqueues (wake_pacing.py)."""
    settings.ALKQUEUE = {"NOTIFY_WINDOW": 0.0}


def _prepared(fragment: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{fragment}%"],
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)  # autocommit, as the worker's claims and acks run
def test_the_claim_is_prepared_on_first_use(q):
    q.enqueue(1)
    q.claim("w")
    assert _prepared("FOR UPDATE SKIP LOCKED") == 1


@pytest.mark.django_db(transaction=True)
def test_the_enqueue_and_the_ack_are_prepared(q):
    q.enqueue(1)
    q.claim_one("w").ack()
    assert _prepared("pg_notify('alkqueue'") == 1
    assert _prepared("USING unnest(") == 1


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_with_a_unique_key_and_one_without_are_prepared_apart(q):
    q.enqueue(1)
    q.enqueue(2, unique_key="k")
    assert _prepared("pg_notify('alkqueue'") == 2
    assert _prepared("ON CONFLICT") == 1


@pytest.mark.django_db(transaction=True)
@override_settings(ALKQUEUE={"NOTIFY_WINDOW": 3600.0})
def test_no_two_hot_statements_take_parameters_of_the_same_count_and_types(q):
    # A statement name another statement holds on the server connection is refused, and run
    # again unprepared, only where the parameters differ (sql/postgresql/session.py).
    q.enqueue(1)
    q.enqueue(2)  # within the window of the first: the enqueue that sends no NOTIFY
    q.enqueue(3, unique_key="k")
    handle = q.claim_one("w")
    handle.heartbeat()
    handle.ack()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT parameter_types::text FROM pg_prepared_statements WHERE name LIKE '_pg3_%'"
        )
        signatures = [row[0] for row in cursor.fetchall()]
    assert _prepared("INSERT INTO alkqueue_message") == 3  # the three kinds of enqueue
    assert len(set(signatures)) == len(signatures), signatures


@pytest.mark.django_db(transaction=True)
@override_settings(ALKQUEUE={"PREPARED_STATEMENTS": False})
def test_prepared_statements_off_prepares_nothing(q):
    q.enqueue(1)
    q.claim_one("w").ack()
    assert _prepared("alkqueue_message") == 0


@pytest.mark.django_db(transaction=True)
def test_an_alias_with_prepare_threshold_none_prepares_nothing(q):
    options = connection.settings_dict.setdefault("OPTIONS", {})
    connection.ensure_connection()
    connection.connection.prepare_threshold = None  # as Django opens it
    options["prepare_threshold"] = None
    try:
        q.enqueue(1)
        q.claim_one("w").ack()
    finally:
        del options["prepare_threshold"]
    assert _prepared("alkqueue_message") == 0


def test_captured_queries_see_the_hot_statements(q):
    with CaptureQueriesContext(connection) as captured:
        q.enqueue(1)
        q.claim("w")
    sqls = [query["sql"] for query in captured.captured_queries]
    assert any("INSERT INTO alkqueue_message" in sql for sql in sqls)
    assert any("FOR UPDATE SKIP LOCKED" in sql for sql in sqls)


def test_execute_wrappers_see_the_hot_statements(q):
    seen: list[str] = []

    def wrapper(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        q.enqueue(1)
    assert any("INSERT INTO alkqueue_message" in sql for sql in seen)


def test_a_failing_hot_statement_raises_djangos_exception():
    with pytest.raises(ProgrammingError):
        fetch_all(connection, "SELECT * FROM alkqueue_no_such_table WHERE id = %s", [1])


def test_an_enqueue_on_the_hot_path_rolls_back_with_the_callers_transaction(q):
    with pytest.raises(DatabaseError), transaction.atomic():
        q.enqueue(1)
        fetch_all(connection, "SELECT 1 / (%s - 1)", [1])
    assert QueueMessage.objects.count() == 0


def test_a_connection_used_from_another_thread_is_refused_as_by_django():
    main = connections["default"]  # this thread's wrapper, not the per-thread proxy
    main.ensure_connection()
    errors: list[Exception] = []

    def use_the_main_threads_connection() -> None:
        try:
            fetch_all(main, "SELECT 1", [])
        except DatabaseError as exc:
            errors.append(exc)

    thread = threading.Thread(target=use_the_main_threads_connection)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert "thread" in str(errors[0])


def test_a_hot_statement_from_a_running_event_loop_is_refused_as_by_django():
    main = connections["default"]
    main.ensure_connection()  # an open connection: Django's own check is not reached by connecting

    async def in_the_loop() -> None:
        fetch_all(main, "SELECT 1", [])

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(in_the_loop())


def test_a_hot_statement_from_a_running_event_loop_runs_with_django_allow_async_unsafe(
    monkeypatch,
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    main = connections["default"]
    main.ensure_connection()

    async def in_the_loop() -> list[tuple[object, ...]]:
        return fetch_all(main, "SELECT %s::int + 1", [1])

    assert asyncio.run(in_the_loop()) == [(2,)]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_from_a_running_event_loop_is_refused_and_writes_nothing(q):
    q.enqueue(1)  # this thread's connection is open

    async def in_the_loop() -> None:
        q.enqueue(2)

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(in_the_loop())
    assert list(QueueMessage.objects.values_list("payload", flat=True)) == [1]


@pytest.mark.django_db(transaction=True)  # autocommit: Django reconnects outside a transaction
def test_a_connection_that_fails_its_health_check_is_replaced_before_a_hot_statement(q):
    main = connections["default"]
    main.close()
    main.settings_dict["CONN_HEALTH_CHECKS"] = True
    try:
        q.enqueue(1)  # connects, with health checks on
        dead_pid = main.connection.info.backend_pid
        other = connections.create_connection("default")
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [dead_pid])
        other.close()
        request_started.send(sender=None)  # each request starts with a new health check
        q.enqueue(2)  # on the terminated connection this would raise OperationalError
        assert main.connection.info.backend_pid != dead_pid
    finally:
        main.settings_dict["CONN_HEALTH_CHECKS"] = False
        main.close()
    assert sorted(QueueMessage.objects.values_list("payload", flat=True)) == [1, 2]


@pytest.mark.django_db(transaction=True)  # autocommit: Django reconnects outside a transaction
def test_after_the_server_drops_the_connection_the_next_hot_statement_reconnects(q):
    q.enqueue(1)
    main = connections["default"]
    dead_pid = main.connection.info.backend_pid
    other = connections.create_connection("default")
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [dead_pid])
    other.close()
    with pytest.raises(OperationalError):
        q.enqueue(2)  # the statement that finds the connection gone
    q.enqueue(3)
    assert main.connection.info.backend_pid != dead_pid
    assert sorted(QueueMessage.objects.values_list("payload", flat=True)) == [1, 3]


@pytest.mark.django_db(transaction=True)  # autocommit: Django reconnects outside a transaction
def test_the_hot_statements_keep_working_after_django_reconnects(q):
    q.enqueue(1)
    connection.close()  # the kept cursor belonged to the closed connection
    q.enqueue(2)
    assert [h.job.payload for h in q.claim("w", 2)] == [1, 2]


@pytest.mark.django_db(transaction=True)  # autocommit: the failure aborts no outer transaction
def test_a_failed_hot_statement_leaves_the_next_one_working(q):
    with pytest.raises(ProgrammingError):
        fetch_all(connection, "SELECT * FROM alkqueue_no_such_table WHERE id = %s", [1])
    assert fetch_all(connection, "SELECT %s::int + 1", [1]) == [(2,)]


def test_a_hot_statement_returns_its_own_rows_not_the_last_ones(q):
    q.enqueue_many([1, 2, 3])
    assert len(q.claim("w", 3)) == 3
    assert fetch_all(connection, "SELECT 1 WHERE false", []) == []


def _plans(fragment: str) -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            [f"%{fragment}%"],
        )
        generic, custom = cursor.fetchone()
    return int(generic), int(custom)


def _settings() -> dict[str, str]:
    with connection.cursor() as cursor:
        return planner_settings(cursor)


@pytest.mark.django_db(transaction=True)  # autocommit, as the worker's claims and acks run
def test_in_autocommit_the_claim_ack_and_heartbeat_are_never_planned_again(q):
    q.enqueue_many(list(range(12)))
    for _ in range(12):
        handle = q.claim_one("w")
        handle.heartbeat()
        handle.ack()
    assert _plans("FOR UPDATE SKIP LOCKED") == (12, 0)
    assert _plans("USING unnest(") == (12, 0)
    assert _plans("FOR NO KEY UPDATE SKIP LOCKED") == (12, 0)


@pytest.mark.django_db(transaction=True)
def test_the_plan_settings_end_with_the_statement_that_asked_for_them(q):
    before = _settings()
    q.enqueue(1)
    q.claim_one("w").ack()
    assert _settings() == before == PLANNER_DEFAULTS


def test_inside_the_callers_transaction_the_claim_is_planned_as_usual(q):
    q.enqueue_many(list(range(7)))
    for _ in range(7):
        q.claim_one("w")
    assert _settings() == PLANNER_DEFAULTS
    assert _plans("FOR UPDATE SKIP LOCKED")[1] >= 5  # custom plans, PostgreSQL's default


def test_a_direct_connection_is_not_behind_a_pooler():
    connection.ensure_connection()
    assert behind_a_pooler(connection) is False


@pytest.mark.django_db(transaction=True)
def test_a_generic_claim_plan_made_on_a_small_table_scans_indexes_in_nested_loops(q):
    q.enqueue_many(list(range(2_000)))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE alkqueue_message")  # the planner now knows the table is tiny
    q.claim_one("w")  # makes and keeps the generic plan
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%FOR UPDATE SKIP LOCKED%"],
        )
        name = cursor.fetchone()[0]
        with transaction.atomic():
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")  # the kept plan
            cursor.execute(
                f"EXPLAIN EXECUTE {name}(%s, now(), 1, gen_random_uuid(), 'w', 'reason', 'print')",
                [q.name],
            )
            plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using alkqueue_pending_idx" in plan
    assert "Seq Scan" not in plan
    assert "Bitmap" not in plan
    assert not re.search(r"(Hash|Merge) (Semi |Anti )?Join", plan)


@pytest.mark.django_db(transaction=True)
def test_a_failed_generic_plan_statement_leaves_the_next_one_working(q):
    with pytest.raises(ProgrammingError):
        fetch_all(connection, "SELECT * FROM alkqueue_no_such_table", [], generic_plan=True)
    assert _settings() == PLANNER_DEFAULTS
    q.enqueue(1)
    assert q.claim_one("w").ack() is True


# Behind a transaction-mode pooler that cannot keep prepared statements, the server connection
# a statement lands on may lack its prepared statement, or hold another one under its name.
# DEALLOCATE and PREPARE on the same connection make those server connections here.


def _server_name(fragment: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement LIKE %s", [f"%{fragment}%"]
        )
        return str(cursor.fetchone()[0])


def _replace_on_the_server(fragment: str, by: str | None) -> None:
    name = _server_name(fragment)
    with connection.cursor() as cursor:
        cursor.execute(f"DEALLOCATE {name}")
        if by is not None:
            cursor.execute(f"PREPARE {name} {by}")


LOST = "ran again unprepared"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "server_side",
    [
        pytest.param(None, id="missing"),
        pytest.param("(int, int, int) AS SELECT $1 + $2 + $3", id="other-parameter-count"),
        pytest.param(
            "(bigint[], uuid[], timestamptz[], bigint[], timestamptz) AS SELECT $5",
            id="other-parameter-types",
        ),
    ],
)
def test_a_claim_whose_prepared_statement_is_lost_runs_again_unprepared(q, caplog, server_side):
    q.enqueue_many([1, 2])
    q.claim_one("w")  # prepares the claim
    _replace_on_the_server("FOR UPDATE SKIP LOCKED", server_side)

    with caplog.at_level(logging.WARNING, logger="django_alkqueue"):
        handles = q.claim("w")

    assert [h.job.payload for h in handles] == [2]
    assert [r.getMessage() for r in caplog.records if LOST in r.getMessage()] != []
    assert QueueMessage.objects.get(pk=handles[0].job.id).attempts == 1  # claimed once


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_whose_statement_name_is_taken_runs_again_unprepared(q, caplog):
    q.enqueue(1)  # prepares the enqueue, under the first name psycopg gives a connection
    name = _server_name("pg_notify('alkqueue'")
    connection.close()
    with connection.cursor() as cursor:  # a new session, whose psycopg starts its names again
        cursor.execute(f"PREPARE {name} AS SELECT 1")

    with caplog.at_level(logging.WARNING, logger="django_alkqueue"):
        q.enqueue(2)

    assert sorted(QueueMessage.objects.values_list("payload", flat=True)) == [1, 2]
    assert [r for r in caplog.records if LOST in r.getMessage()] != []


@pytest.mark.django_db(transaction=True)
def test_a_connection_that_lost_a_prepared_statement_prepares_nothing_more(q, caplog):
    q.enqueue_many(list(range(5)))
    q.enqueue(1)
    q.claim_one("w").ack()  # the four statements of the loop below are prepared
    with connection.cursor() as cursor:
        # One by one: psycopg would see a DEALLOCATE ALL, and forget its statements too.
        cursor.execute("SELECT name FROM pg_prepared_statements")
        for (name,) in cursor.fetchall():
            cursor.execute(f"DEALLOCATE {name}")

    with caplog.at_level(logging.WARNING, logger="django_alkqueue"):
        for _ in range(4):
            # The claim first: it finds its prepared statement missing, and from then on
            # the connection prepares nothing, the enqueue included.
            q.claim_one("w").ack()
            q.enqueue(1)

    assert _prepared("alkqueue_message") == 0
    assert len([r for r in caplog.records if LOST in r.getMessage()]) == 1  # once per connection


@pytest.mark.django_db(transaction=True)
def test_a_data_error_of_the_statements_own_is_raised_and_preparing_goes_on(q, caplog):
    with caplog.at_level(logging.WARNING, logger="django_alkqueue"), pytest.raises(DataError):
        fetch_all(connection, "SELECT 1 / %s::int", [0])
    q.enqueue(1)
    assert _prepared("pg_notify('alkqueue'") == 1
    assert [r for r in caplog.records if LOST in r.getMessage()] == []


def _claimed_and_stored_times(q):
    job = q.enqueue({"a": 1})
    [handle] = q.claim("w")
    stored = QueueMessage.objects.get(id=job.id)
    claimed = handle.job
    fields = ("run_at", "enqueued_at", "claimed_at", "lease_expires_at")
    return [getattr(claimed, f) for f in fields], [getattr(stored, f) for f in fields]


@pytest.mark.django_db(transaction=True)
def test_a_claim_reads_its_timestamps_as_the_orm_does(q):
    claimed, stored = _claimed_and_stored_times(q)
    assert claimed == stored
    assert [t.tzinfo for t in claimed] == [t.tzinfo for t in stored] == [datetime.UTC] * 4


@pytest.mark.django_db(transaction=True)
def test_with_use_tz_off_a_claim_reads_naive_timestamps_as_the_orm_does(q, make_queue):
    _claimed_and_stored_times(q)  # the connection's hot cursor is made, for UTC
    with override_settings(USE_TZ=False, TIME_ZONE="America/New_York"):
        naive = make_queue("naive", clock=FakeClock(datetime.datetime(2030, 1, 15, 9, 30)))
        claimed, stored = _claimed_and_stored_times(naive)
    assert claimed == stored
    assert [t.tzinfo for t in claimed] == [t.tzinfo for t in stored] == [None] * 4
    assert claimed[0] == datetime.datetime(2030, 1, 15, 9, 30)


# Every hot statement runs on the kept psycopg cursor, prepared under psycopg's own names.


def _prepared_names(fragment: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement LIKE %s ORDER BY name",
            [f"%{fragment}%"],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_in_autocommit_an_enqueue_is_prepared_once_under_psycopgs_name(q):
    q.enqueue(1)
    q.enqueue(2)
    assert [name[:5] for name in _prepared_names("pg_notify('alkqueue'")] == ["_pg3_"]
    assert sorted(QueueMessage.objects.values_list("payload", flat=True)) == [1, 2]


@pytest.mark.django_db(transaction=True)
def test_inside_the_callers_transaction_an_enqueue_goes_through_psycopgs_cursor(q):
    with transaction.atomic():
        q.enqueue(1)
    assert [name[:5] for name in _prepared_names("pg_notify('alkqueue'")] == ["_pg3_"]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_that_opens_the_callers_transaction_rolls_back_with_it(q):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        q.enqueue(1)  # the transaction's first statement: psycopg's BEGIN goes first
        1 / 0  # noqa: B018
    q.enqueue(2)
    assert list(QueueMessage.objects.values_list("payload", flat=True)) == [2]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_with_an_expiry_and_one_without_are_prepared_apart(q):
    q.enqueue(1)
    q.enqueue(2, expires=60)  # a timestamp where the first sent NULL
    q.enqueue(3)
    assert [name[:5] for name in _prepared_names("pg_notify('alkqueue'")] == ["_pg3_"] * 2
    assert QueueMessage.objects.filter(expires_at__isnull=False).count() == 1


@pytest.mark.django_db(transaction=True)
def test_after_psycopg_deallocates_everything_on_a_rollback_the_enqueue_is_prepared_again(
    q, caplog
):
    q.enqueue(1)
    q.claim_one("w").ack()  # psycopg now holds prepared statements of its own
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        QueueMessage.objects.count()
        1 / 0  # noqa: B018  # the ROLLBACK makes psycopg send DEALLOCATE ALL
    assert _prepared("alkqueue_message") == 0

    with caplog.at_level(logging.WARNING, logger="django_alkqueue"):
        q.enqueue(2)
        q.enqueue(3)

    assert len(_prepared_names("pg_notify('alkqueue'")) == 1
    assert [r for r in caplog.records if LOST in r.getMessage()] == []
    assert sorted(QueueMessage.objects.values_list("payload", flat=True)) == [2, 3]


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_whose_own_statement_goes_missing_twice_runs_unprepared(q, caplog):
    q.enqueue(1)
    name = _server_name("pg_notify('alkqueue'")
    with connection.cursor() as cursor:
        cursor.execute(f"DEALLOCATE {name}")
        cursor.execute("PREPARE _alkqueue_1 AS SELECT 1")  # the name it would take next

    with caplog.at_level(logging.WARNING, logger="django_alkqueue"):
        q.enqueue(2)

    assert sorted(QueueMessage.objects.values_list("payload", flat=True)) == [1, 2]
    assert [r for r in caplog.records if LOST in r.getMessage()] != []


def test_a_raw_statement_numbers_positional_placeholders_in_order():
    assert raw_statement("SELECT %s, %s::text") == ("SELECT $1, $2::text", ())


def test_a_raw_statement_gives_a_name_used_twice_one_number():
    text, names = raw_statement("WHERE a = %(now)s AND b <= %(n)s OR c > %(now)s")
    assert text == "WHERE a = $1 AND b <= $2 OR c > $1"
    assert names == ("now", "n")


def test_a_raw_statement_keeps_a_literal_percent():
    assert raw_statement("SELECT '100%%', %s") == ("SELECT '100%', $1", ())


def test_a_raw_statement_refuses_both_kinds_of_placeholder():
    with pytest.raises(ValueError, match="not both"):
        raw_statement("SELECT %s, %(n)s")


def test_every_hot_statement_becomes_a_raw_statement_without_a_percent_left():
    hot = [v for k, v in vars(statements).items() if k.isupper() and isinstance(v, str)]
    for sql in hot:
        text, _ = raw_statement(sql)
        assert "%s" not in text and "%(" not in text, sql


@pytest.mark.django_db(transaction=True)
def test_the_claim_binds_its_named_parameters_by_number(q):
    q.enqueue(1)
    (handle,) = q.claim("w", 5)
    assert handle.job.payload == 1
    assert _prepared("LIMIT $") == 1
