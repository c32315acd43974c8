"""Which dialect serves which database (ALKQUEUE["DIALECT"]), the ORM dialect's row locks on a
server database, the leader's session lock, and the database checks alkqueue.E101, E102 and
W101 (docs/databases.md, docs/checks.md)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend
from django.test import override_settings

from django_alkqueue import queue
from django_alkqueue.checks import check_database, sqlite_journal
from django_alkqueue.conf import read_settings
from django_alkqueue.exceptions import UnsupportedDatabase
from django_alkqueue.models import QueueMessage
from django_alkqueue.reports import database_health
from django_alkqueue.sql import dialect_for, dialect_name
from django_alkqueue.sql.locks import SESSION_LOCKS
from django_alkqueue.sql.orm import OrmDialect
from django_alkqueue.sql.orm_rows import CHUNK, INSERT_CHARACTERS, insert_groups
from tests.conftest import run_threads
from tests.workers import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("needs a database server's row locks and sessions; this run is on SQLite")


@pytest.fixture
def extra_alias() -> Iterator[str]:
    """A spare alias in `connections`, removed (and closed) after the test."""
    alias = "alkqueue_extra"
    yield alias
    if alias in connections.settings:
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]


def _add(alias: str, engine: str, name: str, options: dict[str, object]) -> None:
    settings_dict = {**connections["default"].settings_dict, "ENGINE": engine, "NAME": name,
                     "OPTIONS": options, "TEST": {}}  # fmt: skip
    connections.settings[alias] = settings_dict
    connections[alias] = load_backend(engine).DatabaseWrapper(settings_dict, alias)


# -- the dialect of each database --------------------------------------------------------------


def test_dialect_accepts_auto_and_orm_and_refuses_anything_else():
    assert read_settings({}).DIALECT == "auto"
    assert read_settings({"DIALECT": "orm"}).DIALECT == "orm"
    with pytest.raises(ImproperlyConfigured, match=r"ALKQUEUE\['DIALECT'\] is 'mysql'"):
        read_settings({"DIALECT": "mysql"})


def test_forcing_the_orm_dialect_serves_this_database_through_the_orm():
    with override_settings(ALKQUEUE={"DIALECT": "orm"}):
        assert dialect_name(connection) == "orm"
        assert isinstance(dialect_for(connection), OrmDialect)


def test_auto_keeps_postgresql_and_sqlite_on_their_own_dialects_and_others_on_the_orm():
    with override_settings(ALKQUEUE={"DIALECT": "auto"}):
        expected = connection.vendor if connection.vendor in ("postgresql", "sqlite") else "orm"
        assert dialect_name(connection) == expected


def test_a_database_without_skip_locked_is_refused_with_a_clear_error(extra_alias):
    _add(extra_alias, "django.db.backends.dummy", "nothing", {})
    with pytest.raises(UnsupportedDatabase, match="FOR UPDATE SKIP LOCKED"):
        dialect_for(connections[extra_alias])


# -- the ORM dialect on a server: row locks -----------------------------------------------------


def test_an_orm_claim_passes_a_row_another_transaction_holds_and_takes_the_next(
    server, make_queue, clock
):
    q = make_queue("orm-locks")
    held, free = q.enqueue({"n": 1}, priority=5), q.enqueue({"n": 2})
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(QueueMessage.objects.select_for_update().filter(pk=held.id))
                locked.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        claimed, dead = OrmDialect().claim(connection, "orm-locks", "w", 2, clock())
        assert [job.id for job, _ in claimed] == [free.id] and dead == []
    finally:
        release.set()
        holder.join()


def test_the_leaders_session_lock_is_held_by_one_session_at_a_time(server):
    lock = SESSION_LOCKS[connection.vendor]
    assert lock.try_lock(connection)
    others: list[bool] = []
    run_threads(1, lambda _: others.append(lock.try_lock(connections["default"])))
    lock.release(connection)
    run_threads(1, lambda _: others.append(_take_and_release(lock)))
    assert others == [False, True]


def _take_and_release(lock: object) -> bool:
    from django_alkqueue.sql.locks import SessionLock

    assert isinstance(lock, SessionLock)
    got = lock.try_lock(connections["default"])
    lock.release(connections["default"])
    return got


# -- the checks ---------------------------------------------------------------------------------


def test_e101_names_a_queue_database_without_skip_locked(extra_alias):
    _add(extra_alias, "django.db.backends.dummy", "nothing", {})
    with override_settings(ALKQUEUE={"DATABASE": extra_alias}):
        [error] = check_database(databases=[extra_alias])
    assert error.id == "alkqueue.E101" and "SKIP LOCKED" in error.msg


def _sqlite(path: Path, options: dict[str, object]) -> BaseDatabaseWrapper:
    """A connection of its own to an SQLite file, outside `connections` (which the test
    framework guards)."""
    settings_dict = {**connections["default"].settings_dict, "NAME": str(path),
                     "ENGINE": "django.db.backends.sqlite3", "OPTIONS": options}  # fmt: skip
    return load_backend("django.db.backends.sqlite3").DatabaseWrapper(settings_dict, "spare")


def test_w101_warns_of_an_sqlite_file_outside_wal_mode(tmp_path: Path):
    path = tmp_path / "rollback-journal.db"
    sqlite3.connect(path).close()
    spare = _sqlite(path, {})
    try:
        [warning] = sqlite_journal(spare)
    finally:
        spare.close()
    assert warning.id == "alkqueue.W101" and "'delete'" in warning.msg


def test_w101_is_quiet_for_an_sqlite_file_in_wal_mode(tmp_path: Path):
    spare = _sqlite(tmp_path / "wal.db", {"init_command": "PRAGMA journal_mode=WAL;"})
    try:
        assert sqlite_journal(spare) == []
    finally:
        spare.close()


def test_the_queue_database_of_this_run_passes_the_database_checks():
    assert check_database(databases=["default"]) == []


def test_the_database_checks_connect_only_for_the_aliases_django_names():
    # `manage.py check` without --database names none: nothing connects.
    assert check_database(databases=None) == []


E102_PROJECT = """
import django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    TASKS={"default": {"BACKEND": "django_alkqueue.backend.AlkQueueBackend"}},
)
django.setup()
import django.tasks  # a project using tasks imports the framework (and so its checks)
from django.core.management import call_command
call_command("check")
"""


def test_e102_the_tasks_backend_without_the_app_installed_stops_check_with_its_id():
    pytest.importorskip("django.tasks")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", E102_PROJECT], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)  # fmt: skip
    assert done.returncode != 0
    assert "alkqueue.E102" in done.stderr and "INSTALLED_APPS" in done.stderr


# -- the admin's health on MySQL and MariaDB ----------------------------------------------------


def test_a_long_innodb_history_list_is_a_warning_that_names_the_open_transaction():
    assert database_health.judge_history_length(12).warning is None
    check = database_health.judge_history_length(database_health.HISTORY_LENGTH_WARN)
    assert check.warning is not None and "INNODB_TRX" in check.warning


def test_an_unreadable_history_list_says_which_privilege_is_missing():
    assert "PROCESS" in database_health.judge_history_length(None).status


def test_the_health_section_reads_the_history_list_length_where_the_database_keeps_one(clock):
    titles = [check.title for check in database_health.run_checks("default", clock())]
    has_it = dialect_for(connection).supports_undo_history
    assert ("InnoDB history list length" in titles) == has_it
    assert has_it == (connection.vendor == "mysql")
    if has_it:
        [check] = [c for c in database_health.run_checks("default", clock()) if "InnoDB" in c.title]
        assert "undo records not yet purged" in check.status


def test_on_mysql_the_orm_claim_reads_the_stand_in_index_in_handout_order(server, clock):
    if connection.vendor != "mysql":
        pytest.skip("the stand-in index exists only where partial indexes do not")
    with transaction.atomic():
        plan = OrmDialect().due(connection, "q", clock()).values_list("id")[:10].explain()
    assert "alkqueue_claim_full_idx" in plan and "filesort" not in plan.lower()


def test_an_insert_group_carries_at_most_chunk_rows_and_its_character_budget():
    big = "x" * (INSERT_CHARACTERS // 3 + 1)
    texts = ["{}"] * (CHUNK + 1) + [big] * 4 + ["x" * (INSERT_CHARACTERS + 5)] + ["{}"]
    groups = [texts[group] for group in insert_groups(texts)]
    assert [len(g) for g in groups] == [CHUNK, 3, 2, 1, 1]
    assert [text for g in groups for text in g] == texts
    assert all(len(g) == 1 or sum(map(len, g)) <= INSERT_CHARACTERS for g in groups)


@pytest.mark.skipif(connection.vendor != "mysql", reason="MySQL's max_allowed_packet")
def test_enqueue_many_of_payloads_adding_up_past_max_allowed_packet_writes_every_job():
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@max_allowed_packet")
        packet = int(cursor.fetchone()[0])
    payload = {"text": "x" * (1024 * 1024 - 20)}  # 1 MiB, the default MAX_PAYLOAD_BYTES
    jobs = queue("big-many").enqueue_many([payload] * (packet // (1024 * 1024) + 2))
    assert QueueMessage.objects.filter(queue="big-many").count() == len(jobs)
