"""django-alkqueue on SQLite (its own dialect): the same user of the library as
systems/alkqueue.py, with its database a file beside raw_sqlite.py's (WAL,
synchronous=NORMAL, `"transaction_mode": "IMMEDIATE"`: the testproject's settings, which
bench/settings/base.py gives every SQLite URL).

Only the enqueue and drain figures, and the pickup latency, as on MariaDB, with the
enqueues taken side by side with raw_sqlite's INSERTs in the same file (bench/suite.py); the
claim+ack scenarios stay on PostgreSQL. No server, so no server CPU: the workers' CPU is all
of it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

from .. import common
from . import Config
from .alkqueue import AlkQueue
from .raw_sqlite import path_of, remove


class AlkQueueSQLite(AlkQueue):
    name = "alkqueue_sqlite"
    title = "django-alkqueue (SQLite)"
    #: No server: no process has this name, so the server CPU reads 0.
    server_process = ""
    #: SQLite frees pages in place: the harness's VACUUM stand-in is PostgreSQL's.
    vacuum_tables: tuple[str, ...] = ()  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.path = path_of(self.database)

    def create_database(self) -> None:
        remove(self.path)

    def drop_database(self) -> None:
        remove(self.path)

    def env(self, **extra: str) -> dict[str, str]:
        return common.python_env(self.settings, BENCH_DATABASE_URL=f"sqlite:///{self.path}",
                                 **extra)  # fmt: skip

    def versions(self) -> dict[str, str]:
        return {**super().versions(),
                "SQLite": f"{sqlite3.sqlite_version}, WAL, synchronous=NORMAL"}  # fmt: skip

    def connection(self) -> Any:
        """The polls go through the ORM (unfinished) and need no connection of their own."""
        return contextlib.nullcontext(None)

    def poll_backend_pid(self, conn: Any) -> int:
        return 0

    def workers_ready(self, workers: common.Workers) -> bool:
        return workers.has_open(self.path)

    def reset(self) -> None:
        """Every table of the app emptied: one DELETE each in one transaction (SQLite has no
        TRUNCATE; it frees the pages in place, no dead rows are left for the claims)."""
        from django.apps import apps
        from django.db import connection, transaction

        models = apps.get_app_config("django_alkqueue").get_models()
        with transaction.atomic(), connection.cursor() as cursor:
            for model in models:
                if model._meta.managed:
                    cursor.execute(f'DELETE FROM "{model._meta.db_table}"')

    def configs(self, quick: bool) -> list[Config]:
        # synchronous_commit is PostgreSQL's setting.
        return [c for c in super().configs(quick) if "synchronous_commit" not in c.options]
