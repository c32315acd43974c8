"""Django's warnings about what a database without partial indexes (MariaDB, MySQL) cannot
build as declared (models.W036, W037, W043) are answered, for the library's own models, by
the stand-ins the migrations build there (models.STAND_INS): `check` and `migrate` print
none, a user's model keeps them, and alkqueue.W102 says when a stand-in is missing. On
PostgreSQL and SQLite nothing changes (docs/databases.md, "Indexes"; docs/checks.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.db import connection, models
from django.test.utils import isolate_apps

from django_alkqueue.checks import check_stand_ins
from django_alkqueue.models import (
    FAIR_KEY_INDEX,
    MESSAGE_TABLE,
    STAND_INS,
    QueueMessage,
    StandIn,
    stood_in_warnings,
    without_stood_in,
)
from django_alkqueue.sql.stand_ins import missing_stand_ins
from tests.workers import run_manage

pytestmark = pytest.mark.django_db

PARTIAL_WARNINGS = {"models.W036", "models.W037", "models.W043"}
OUR_MODELS = list(apps.get_app_config("django_alkqueue").get_models())
NO_ISSUES = "System check identified no issues (0 silenced)."
on_mysql = pytest.mark.skipif(
    connection.vendor != "mysql", reason="needs a database without partial indexes"
)
#: The commands run beside the test: on SQLite, a test's transaction would hold the write
#: lock that their connections wait for.
in_subprocess = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fresh_mysql_database(django_db_blocker: Any) -> Iterator[dict[str, str]]:
    """A new, empty database on the test run's server, never migrated: the environment that
    points the project at it."""
    db = settings.DATABASES["default"]
    name = f"{db['NAME']}_stand_ins"
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    try:
        host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 3306
        yield {"DATABASE_URL": f"mysql://{db['USER']}:{db['PASSWORD']}@{host}:{port}/{name}"}
    finally:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {name}")


def warnings_of(output: str) -> list[str]:
    return [line for line in output.splitlines() if "(models.W0" in line or "(alkqueue." in line]


# -- what a user sees ---------------------------------------------------------------------------


@in_subprocess
@pytest.mark.parametrize("args", [(), ("--database", "default")], ids=["plain", "database"])
def test_manage_py_check_prints_no_issue(args):
    result = run_manage("check", *args)

    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and result.stdout.strip() == NO_ISSUES


@on_mysql
@in_subprocess
def test_migrate_of_a_migrated_database_prints_no_warning():
    result = run_manage("migrate")

    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and "No migrations to apply." in result.stdout


@on_mysql
@in_subprocess
def test_the_first_migrate_of_a_new_database_prints_no_warning(fresh_mysql_database):
    """Its checks run before the tables exist: a stand-in still to be built is not missing."""
    result = run_manage("migrate", env_extra=fresh_mysql_database)

    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and not warnings_of(result.stdout)
    assert "Applying django_alkqueue.0017_signal_permission... OK" in result.stdout


# -- the models' own check -----------------------------------------------------------------------


def test_the_librarys_models_report_no_warning_on_the_test_database():
    assert [m for model in OUR_MODELS for m in model.check(databases=["default"])] == []


@on_mysql
def test_on_mysql_django_warns_of_the_queue_tables_partial_indexes_and_the_stand_ins_answer():
    django_says = super(QueueMessage, QueueMessage).check(databases=["default"])

    # MySQL 8.0.13+ builds indexes on expressions (no W043); MariaDB does not.
    assert {"models.W036", "models.W037"} <= {m.id for m in django_says} <= PARTIAL_WARNINGS
    assert without_stood_in(django_says, QueueMessage, ["default"]) == []


def test_where_partial_indexes_exist_django_says_nothing_of_the_queue_table():
    if connection.vendor == "mysql":
        pytest.skip("MariaDB and MySQL have no partial indexes")
    assert super(QueueMessage, QueueMessage).check(databases=["default"]) == []


@isolate_apps("testproject.shop")
def test_a_users_model_with_a_partial_index_keeps_djangos_warning():
    class Order(models.Model):
        placed_at = models.DateTimeField(null=True)

        class Meta:
            app_label = "shop"
            indexes = [
                models.Index(
                    fields=["placed_at"],
                    name="shop_placed_idx",
                    condition=models.Q(placed_at__isnull=False),
                )
            ]

        def __str__(self) -> str:
            return str(self.placed_at)

    messages = Order.check(databases=["default"])

    assert without_stood_in(messages, Order, ["default"]) == messages
    assert ("models.W037" in {m.id for m in messages}) == (connection.vendor == "mysql")


def test_a_database_with_partial_indexes_but_none_on_expressions_keeps_w043(monkeypatch):
    """The migrations build the claim index's stand-in only where partial indexes are missing."""
    monkeypatch.setattr(connection.features, "supports_partial_indexes", True)
    monkeypatch.setattr(connection.features, "supports_expression_indexes", False)

    answered = stood_in_warnings(QueueMessage, ["default"])

    assert "models.W043" not in answered and "models.W036" in answered


def test_each_index_built_without_its_condition_stands_in_for_itself_on_its_columns():
    for model in OUR_MODELS:
        for index in model._meta.indexes:
            stand_in = STAND_INS.get(index.name)
            if stand_in is not None and stand_in.name == index.name:
                assert stand_in == StandIn(model._meta.db_table, index.name, tuple(index.fields))


@on_mysql
def test_no_two_indexes_of_a_queue_table_cover_the_same_columns():
    """An index built without its condition may repeat another; migration 0019 drops the
    second, so a row's write pays for each index once."""
    tables = sorted({model._meta.db_table for model in OUR_MODELS})
    placeholders = ", ".join(["%s"] * len(tables))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, index_name, column_name FROM information_schema.STATISTICS "
            f"WHERE table_schema = DATABASE() AND table_name IN ({placeholders}) "
            "ORDER BY table_name, index_name, seq_in_index",
            tables,
        )
        columns: dict[tuple[str, str], list[str]] = {}
        for table, index, column in cursor.fetchall():
            columns.setdefault((table, index), []).append(column)
    seen: dict[tuple[str, tuple[str, ...]], str] = {}
    repeated = []
    for (table, index), indexed in sorted(columns.items()):
        other = seen.setdefault((table, tuple(indexed)), index)
        if other != index:
            repeated.append(f"{table}: {other} and {index} on {indexed}")

    assert repeated == []


# -- alkqueue.W102 -------------------------------------------------------------------------------


def test_the_migrated_test_database_lacks_no_stand_in():
    assert check_stand_ins(databases=["default"]) == []


@on_mysql
@pytest.mark.django_db(transaction=True)  # MySQL commits DDL at once
def test_a_stand_in_missing_from_the_database_is_alkqueue_w102():
    stand_in = STAND_INS[FAIR_KEY_INDEX]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {stand_in.name} ON {stand_in.table}")
    try:
        messages = check_stand_ins(databases=["default"])
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE INDEX {stand_in.name} ON {stand_in.table} (queue, fair_key)")

    assert [m.id for m in messages] == ["alkqueue.W102"]
    assert f"'{FAIR_KEY_INDEX}'" in messages[0].msg
    assert messages[0].msg.endswith(
        "CREATE INDEX alkqueue_fair_key_idx ON alkqueue_message (queue, fair_key)"
    )


@on_mysql
@pytest.mark.parametrize(
    "stand_in",
    [
        StandIn(MESSAGE_TABLE, "alkqueue_later_idx", ("queue", "later_column")),
        StandIn("alkqueue_later_table", "alkqueue_later_idx", ("queue",)),
    ],
    ids=["column", "table"],
)
def test_a_stand_in_of_a_column_or_table_still_to_come_is_not_missing(stand_in, monkeypatch):
    """Migrations still to run build it: an upgrade's `migrate` warns of nothing."""
    monkeypatch.setitem(STAND_INS, "alkqueue_later", stand_in)

    assert missing_stand_ins(connection) == {}


@on_mysql
def test_the_stand_in_check_connects_only_where_the_command_names_the_queues_database(
    monkeypatch,
):
    """Like Django's database checks: in `migrate` and `check --database`, not a plain `check`."""
    monkeypatch.setitem(STAND_INS, "x", StandIn(MESSAGE_TABLE, "alkqueue_absent_idx", ("queue",)))

    assert check_stand_ins(databases=[]) == []
    assert [m.id for m in check_stand_ins(databases=["default"])] == ["alkqueue.W102"]
