"""The alk_* commands against a database they cannot use: one line on stderr and a
documented exit status (3 unreachable or refused, 4 migrations unapplied), not a traceback;
`-v 2` and `--traceback` print the traceback too. And the system check that says the app is
missing from INSTALLED_APPS while our AdminConfig is there (alkqueue.E103). Each runs the real
command in a subprocess against a real server (docs/operations.md, "When a command cannot
start")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

import django_alkqueue
from django_alkqueue.reports import health
from tests.workers import run_manage

pytestmark = pytest.mark.django_db

#: Each command with the arguments of a plain run.
COMMANDS = [
    ("alk_status",),
    ("alk_periodic",),
    ("alk_worker", "--burst"),
    ("alk_jobs", "list"),
]


def closed_port_env(tmp_path: Path) -> dict[str, str]:
    """The project pointed at a server that is not there (port 1; for SQLite a file in a
    directory that does not exist)."""
    if connection.vendor == "sqlite":
        return {"ALKQUEUE_SQLITE_NAME": str(tmp_path / "missing-dir" / "db.sqlite3")}
    if connection.vendor == "postgresql":
        return {"DATABASE_URL": "postgres://root@127.0.0.1:1/nowhere"}
    return {"DATABASE_URL": "mysql://alkqueue:alkqueue@127.0.0.1:1/nowhere"}


def refused_role_env() -> dict[str, str]:
    """The right server, a role it refuses: one that does not exist (PostgreSQL), a wrong
    password (MariaDB)."""
    db = settings.DATABASES["default"]
    host, name = db.get("HOST") or "127.0.0.1", db["NAME"]
    if connection.vendor == "postgresql":
        return {"DATABASE_URL": f"postgres://no_such_role@{host}:{db.get('PORT') or 5432}/{name}"}
    return {"DATABASE_URL": f"mysql://alkqueue:wrong@{host}:{db.get('PORT') or 3306}/{name}"}


@pytest.fixture(scope="module")
def fresh_database(
    tmp_path_factory: pytest.TempPathFactory, django_db_setup: None, django_db_blocker: Any
) -> Iterator[dict[str, str]]:
    """A new, empty database on the test run's server, never migrated: the environment that
    points the project at it. One for the module: PostgreSQL's DROP DATABASE waits for a
    checkpoint, which took up to a minute on a busy server."""
    if connection.vendor == "sqlite":
        yield {"ALKQUEUE_SQLITE_NAME": str(tmp_path_factory.mktemp("fresh") / "fresh.sqlite3")}
        return
    db = settings.DATABASES["default"]
    name = f"{db['NAME']}_fresh"
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT")
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    try:
        if connection.vendor == "postgresql":
            yield {"DATABASE_URL": f"postgres://{db['USER']}@{host}:{port or 5432}/{name}"}
        else:
            url = f"mysql://{db['USER']}:{db['PASSWORD']}@{host}:{port or 3306}/{name}"
            yield {"DATABASE_URL": url}
    finally:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {name}")


def the_line(stderr: str) -> str:
    """The command's one line: stderr has nothing else."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# -- the database is not there, or refuses -----------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_server_that_is_not_there_is_one_line_and_exit_3(command, tmp_path):
    result = run_manage(*command, env_extra=closed_port_env(tmp_path))

    assert result.returncode == health.DATABASE_UNREACHABLE, result.stderr
    assert the_line(result.stderr).startswith("database 'default' unreachable: OperationalError: ")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_role_the_server_refuses_is_the_drivers_message_on_one_line_and_exit_3(command):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no roles")
    result = run_manage(*command, env_extra=refused_role_env())

    assert result.returncode == health.DATABASE_UNREACHABLE, result.stderr
    line = the_line(result.stderr)
    assert line.startswith("database 'default' unreachable: OperationalError: ")
    assert ("no_such_role" if connection.vendor == "postgresql" else "Access denied") in line


@pytest.mark.parametrize("command", [("alk_status",), ("alk_jobs", "list")], ids=lambda c: c[0])
@pytest.mark.parametrize("verbosity", [["-v", "2"], ["--traceback"]], ids=["v2", "traceback"])
def test_verbosity_2_or_traceback_prints_the_traceback_before_the_line(
    command, verbosity, tmp_path
):
    result = run_manage(*command, *verbosity, env_extra=closed_port_env(tmp_path))

    assert result.returncode == health.DATABASE_UNREACHABLE, result.stderr
    assert "Traceback (most recent call last):" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("database 'default' unreachable: OperationalError: ")


# -- the migrations are not applied ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # CREATE DATABASE runs outside a transaction
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_database_never_migrated_says_run_migrate_and_exits_4(command, fresh_database):
    result = run_manage(*command, env_extra=fresh_database)

    assert result.returncode == health.MIGRATIONS_UNAPPLIED, result.stderr
    line = the_line(result.stderr)
    ours = len(list((Path(django_alkqueue.__file__).parent / "migrations").glob("0*.py")))
    assert line.startswith(f"{ours} unapplied migrations: django_alkqueue.0001_initial, ")
    assert line.endswith("; run `python manage.py migrate`")


# -- the app missing from INSTALLED_APPS -------------------------------------------------------


def test_our_admin_config_without_the_app_is_system_check_e103_with_a_hint():
    env = {"DJANGO_SETTINGS_MODULE": "tests.no_app_settings"}

    result = run_manage("check", env_extra=env)

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "RuntimeError" not in result.stderr
    error = "(alkqueue.E103) django_alkqueue.admin_site.AdminConfig is in INSTALLED_APPS"
    assert f'{error}, but "django_alkqueue" is not' in result.stderr
    hint = 'HINT: Add "django_alkqueue" to INSTALLED_APPS, then run `manage.py migrate`.'
    assert f"{hint} See docs/checks.md#alkqueuee103." in result.stderr


def test_without_the_app_nor_our_admin_config_the_models_refuse_with_what_to_do():
    env = {"DJANGO_SETTINGS_MODULE": "tests.no_app_settings", "ALKQUEUE_TEST_DJANGO_ADMIN": "1"}

    result = run_manage("check", env_extra=env)

    assert result.returncode == 1
    assert "RuntimeError" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        'django.core.exceptions.ImproperlyConfigured: "django_alkqueue" is not in '
        "INSTALLED_APPS: add it, then run `python manage.py migrate`. See "
        "docs/checks.md#alkqueuee103."
    )
