"""Scenario 10, migrations (PostgreSQL, SQLite and MariaDB): on a scratch database of their own, the
app's migrations apply forward, unapply back to zero (every alkqueue table gone), and apply
forward again to the very same schema (columns, indexes, constraints, storage options); the
long version also steps back and forth one migration at a time. `makemigrations --check
--dry-run` finds nothing to write for any app."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from django_alkqueue.models import MESSAGE_TABLE
from tests.workers import ROOT, run_manage

from .invariants import Figures, Report
from .record import Stopwatch, record
from .scale import LONG

APP = "django_alkqueue"
MIGRATIONS = sorted(p.stem for p in (ROOT / APP / "migrations").glob("0*.py"))

_PG_SCHEMA = [
    "SELECT table_name, column_name, data_type, is_nullable, column_default "
    "FROM information_schema.columns WHERE table_name LIKE 'alkqueue%%' ORDER BY 1, 2",
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename LIKE 'alkqueue%%' ORDER BY 1",
    "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE conrelid::regclass::text LIKE 'alkqueue%%' ORDER BY 1, 2",
    "SELECT relname, reloptions FROM pg_class WHERE relname LIKE 'alkqueue%%' ORDER BY 1",
]


_MYSQL_SCHEMA = [
    "SELECT table_name, column_name, column_type, is_nullable, column_default "
    "FROM information_schema.columns WHERE table_schema = %s AND table_name LIKE 'alkqueue%%' "
    "ORDER BY 1, 2",
    "SELECT table_name, index_name, non_unique, seq_in_index, column_name, collation "
    "FROM information_schema.statistics WHERE table_schema = %s "
    "AND table_name LIKE 'alkqueue%%' ORDER BY 1, 2, 4",
    "SELECT table_name, constraint_name, constraint_type FROM information_schema.table_constraints "
    "WHERE table_schema = %s AND table_name LIKE 'alkqueue%%' ORDER BY 1, 2",
]


class Scratch:
    """A database of the same vendor as the test run, migrated by `manage.py` subprocesses."""

    def __init__(self) -> None:
        self.commands = 0
        self.vendor = connection.vendor
        db = connection.settings_dict
        if self.vendor == "postgresql":
            self.name = f"alk_migrations_{os.getpid()}"
            self.params = {
                "host": db.get("HOST") or "127.0.0.1",
                "port": int(db.get("PORT") or 5432),
                "user": db["USER"],
            }
            self.env = {
                "DATABASE_URL": f"postgres://{db['USER']}@{self.params['host']}:"
                f"{self.params['port']}/{self.name}"
            }
            self._admin(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(self.name)))
            self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        elif self.vendor == "mysql":
            # Named like the test databases, which the Makefile's user may create and drop.
            self.name = f"test_alkqueue_migrations_{os.getpid()}"
            self.params = {
                "host": db.get("HOST") or "127.0.0.1",
                "port": int(db.get("PORT") or 3306),
                "user": db["USER"],
                "password": db["PASSWORD"],
            }
            p = self.params
            self.env = {
                "DATABASE_URL": f"mysql://{p['user']}:{p['password']}@{p['host']}:{p['port']}/"
                f"{self.name}"
            }
            self._mysql(f"DROP DATABASE IF EXISTS `{self.name}`")
            self._mysql(f"CREATE DATABASE `{self.name}` CHARACTER SET utf8mb4")
        else:
            handle, path = tempfile.mkstemp(prefix="alkqueue-migrations-", suffix=".db")
            os.close(handle)
            self.path = Path(path)
            self.env = {"DATABASE_URL": "", "ALKQUEUE_SQLITE_NAME": path}

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(dbname="postgres", autocommit=True, **self.params) as conn:
            conn.execute(statement)

    def _mysql(self, statement: str, *params: object) -> list[tuple[object, ...]]:
        import MySQLdb

        conn = MySQLdb.connect(**self.params)
        try:
            cursor = conn.cursor()
            cursor.execute(statement, params or None)
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            conn.close()

    def manage(self, *args: str) -> str:
        self.commands += 1
        result = run_manage(*args, timeout=120, env_extra=self.env)
        output = result.stdout + result.stderr
        assert result.returncode == 0, (
            f"manage.py {' '.join(args)} exited {result.returncode}:\n{output}"
        )
        return output

    def schema(self) -> list[tuple[object, ...]]:
        """Everything that describes the alkqueue tables, in a stable order."""
        if self.vendor == "postgresql":
            with psycopg.connect(dbname=self.name, **self.params) as conn:
                return [
                    tuple(row) for q in _PG_SCHEMA for row in conn.execute(q.replace("%%", "%"))
                ]
        if self.vendor == "mysql":
            return [row for q in _MYSQL_SCHEMA for row in self._mysql(q, self.name)]
        import sqlite3

        with sqlite3.connect(self.path) as conn:
            return conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master "
                "WHERE tbl_name LIKE 'alkqueue%' ORDER BY type, name"
            ).fetchall()

    def drop(self) -> None:
        if self.vendor == "postgresql":
            self._admin(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
            )
        elif self.vendor == "mysql":
            self._mysql(f"DROP DATABASE IF EXISTS `{self.name}`")
        else:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)


@pytest.fixture
def scratch() -> Iterator[Scratch]:
    database = Scratch()
    try:
        yield database
    finally:
        database.drop()


def test_migrations_apply_unapply_to_zero_and_reapply_to_the_same_schema(
    scratch: Scratch, django_db_blocker: Any
):
    clock = Stopwatch()
    scratch.manage("migrate", "-v", "0")
    first = scratch.schema()
    assert any(MESSAGE_TABLE in map(str, row) for row in first), first

    scratch.manage("migrate", APP, "zero", "-v", "0")
    assert scratch.schema() == [], "alkqueue tables left after migrate zero"

    if LONG:  # one migration at a time, forward then back, then forward again
        for name in MIGRATIONS:
            scratch.manage("migrate", APP, name, "-v", "0")
        for previous in reversed(["zero", *MIGRATIONS[:-1]]):
            scratch.manage("migrate", APP, previous, "-v", "0")
        assert scratch.schema() == []
    scratch.manage("migrate", "-v", "0")
    again = scratch.schema()

    assert again == first
    report = Report(Figures(), [])
    # The record names the server (MariaDB or MySQL), which takes a query on the test
    # database; this test touches only its scratch one, through subprocesses.
    with django_db_blocker.unblock():
        record(
            10,
            "Migrations",
            f"{len(MIGRATIONS)} migrations applied, unapplied to zero and reapplied"
            + (", also one step at a time" if LONG else "")
            + " on a scratch database; the "
            "schema compared before and after; makemigrations --check",
            report,
            clock.seconds(),
            {"manage_commands": scratch.commands, "schema_rows": len(first)},
        )


def test_makemigrations_check_finds_nothing_to_write(scratch: Scratch):
    output = scratch.manage("makemigrations", "--check", "--dry-run")
    assert "No changes detected" in output
