"""System checks. Every id is stable and documented once, in docs/checks.md; their hints are
check_hints.py's. Imported by the app's ready(), once the models can be; alkqueue.E103,
which must run without the app, is admin_site.py's."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .check_hints import error as _error
from .check_hints import hint as _hint
from .conf import SettingsErrors, get_settings
from .consumers import registry
from .exceptions import UnsupportedDatabase
from .limits import NAMES, settings_limits
from .models import StandIn
from .periodic import entry_errors
from .sql import dialect_name
from .sql.sqlite import file_journal_mode
from .sql.stand_ins import missing_stand_ins


@checks.register("alkqueue")
def check_consumers(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E001: consumer discovery failed (two consumers for one queue, ...)."""
    return [_error(message, "alkqueue.E001") for message in registry.errors]


@checks.register("alkqueue")
def check_periodic(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E002: a PERIODIC entry with a bad cron, queue, task path or no target."""
    try:
        periodic = get_settings().PERIODIC
    except ImproperlyConfigured:  # reported by alkqueue.E003
        return []
    return [
        _error(message, "alkqueue.E002")
        for name, entry in periodic.items()
        for message in entry_errors(name, entry)
    ]


@checks.register("alkqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E003: the ALKQUEUE setting is not a dict, has an unknown key or a bad value.
    alkqueue.E004: DATABASE or LISTEN_DATABASE names an alias that DATABASES lacks."""
    try:
        settings = get_settings()
    except SettingsErrors as exc:  # every bad key and value, each an error of its own
        return [_error(problem, "alkqueue.E003") for problem in exc.problems]
    except ImproperlyConfigured as exc:
        return [_error(str(exc), "alkqueue.E003")]
    return [
        _error(f"ALKQUEUE[{key!r}] is {alias!r}, which is not in DATABASES.", "alkqueue.E004")
        for key, alias in (("DATABASE", settings.DATABASE),
                           ("LISTEN_DATABASE", settings.LISTEN_DATABASE))
        if alias is not None and alias not in connections
    ]  # fmt: skip


@checks.register("alkqueue")
def check_limits(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E005: a queue whose @consumer and ALKQUEUE["QUEUES"] entry set different
    limits: a limit the entry names differs from the decorator's, None included
    (docs/flow-control.md)."""
    try:
        queues = get_settings().QUEUES
    except ImproperlyConfigured:  # reported by alkqueue.E003
        return []
    errors: list[checks.CheckMessage] = []
    for name, options in queues.items():
        spec = registry.get(name)
        if spec is None or not any(option in options for option in NAMES):
            continue
        configured = settings_limits(name)
        differ = [
            f"{limit} {getattr(spec.limits, limit)} in code, {getattr(configured, limit)} "
            "in settings"
            for limit in NAMES
            if limit in options and getattr(spec.limits, limit) != getattr(configured, limit)
        ]
        if differ:
            errors.append(_error(
                f"queue {name!r} has different limits in its @consumer ({spec.path}) and in "
                f"ALKQUEUE['QUEUES']: {'; '.join(differ)}.", "alkqueue.E005",
            ))  # fmt: skip
    return errors


# Tagged "database" alone: Django runs such checks where they may connect, in `migrate` and
# in `check --database ALIAS`, for the aliases named there; `check --tag alkqueue` stays
# static.
@checks.register(checks.Tags.database)
def check_database(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """alkqueue.E101: the queue's database has no dialect (no SKIP LOCKED).
    alkqueue.W101: the queue's database is an SQLite file not in WAL mode."""
    connection = queue_connection(databases)
    if connection is None:
        return []
    try:
        found = sqlite_journal(connection)
        dialect_name(connection)
        return found
    except UnsupportedDatabase as exc:
        return [_error(str(exc), "alkqueue.E101")]
    except DatabaseError:
        return []  # the server is not reachable now; the worker reports that when it starts


@checks.register(checks.Tags.database)
def check_stand_ins(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """alkqueue.W102: the queue's database has no partial indexes and lacks a stand-in the
    migrations build for one (models.STAND_INS), which the models' own check then relies on."""
    connection = queue_connection(databases)
    if connection is None:
        return []
    try:
        missing = missing_stand_ins(connection)
    except DatabaseError:
        return []  # as in check_database
    return [
        checks.Warning(missing_message(connection.alias, name, stand_in),
                       hint=_hint("alkqueue.W102"), id="alkqueue.W102")
        for name, stand_in in missing.items()
    ]  # fmt: skip


def missing_message(alias: str, name: str, stand_in: StandIn) -> str:
    """What is missing, what it stands in for and the statement that builds it."""
    what = (
        "which the migrations build there without its condition"
        if stand_in.name == name
        else f"which stands in for {name!r} there"
    )
    create = (
        f"CREATE {'UNIQUE ' if stand_in.unique else ''}INDEX {stand_in.name} ON "
        f"{stand_in.table} ({', '.join(stand_in.columns)})"
    )
    return (
        f"The queue's database {alias!r} has no partial indexes and no index "
        f"{stand_in.name!r} on {stand_in.table}, {what}: {create}"
    )


def queue_connection(databases: Any) -> BaseDatabaseWrapper | None:
    """The queue's database, if the check may connect to it (`databases` names it)."""
    try:
        alias = get_settings().DATABASE
    except ImproperlyConfigured:  # reported by alkqueue.E003
        return None
    if alias not in connections or alias not in (databases or ()):  # E004 reports the first
        return None
    return connections[alias]


def sqlite_journal(connection: BaseDatabaseWrapper) -> list[checks.CheckMessage]:
    """Without WAL a reader waits for the writer and the writer for every reader: a worker
    and a web process on one file stall each other (an in-memory database is one process).
    Nothing for another database."""
    mode = file_journal_mode(connection)
    if mode in (None, "wal", "memory"):
        return []
    message = (
        f"The queue's SQLite database {connection.alias!r} is in journal mode {mode!r}, not "
        "WAL: a worker and a web process sharing it will wait on each other's locks."
    )
    return [checks.Warning(message, hint=_hint("alkqueue.W101"), id="alkqueue.W101")]
