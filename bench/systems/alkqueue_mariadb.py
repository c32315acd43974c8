"""django-alkqueue on MariaDB (the ORM dialect): the same user of the library as
systems/alkqueue.py, with its database on the local MariaDB server instead of PostgreSQL.

Only the enqueue and drain figures, and the pickup latency, with the enqueues taken side by
side with raw_mariadb's INSERTs in this database (bench/suite.py); the claim+ack scenarios
stay on PostgreSQL. The database's name is the
run's (PREFIX + name); the Makefile's MariaDB user may create `bench_*` databases.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import urlsplit

from .. import common
from . import Config
from .alkqueue import AlkQueue
from .mariadb_server import SERVER, questions


class AlkQueueMariaDB(AlkQueue):
    name = "alkqueue_mariadb"
    title = "django-alkqueue (MariaDB)"
    server_process = "mariadbd"
    server_port = 3306
    #: InnoDB purges in the background: the harness's VACUUM stand-in is PostgreSQL's.
    vacuum_tables: tuple[str, ...] = ()  # type: ignore[assignment]

    def _admin(self, statement: str) -> None:
        import MySQLdb

        url = urlsplit(SERVER)
        conn = MySQLdb.connect(host=url.hostname or "127.0.0.1", port=url.port or 3306,
                               user=url.username or "", password=url.password or "")  # fmt: skip
        try:
            conn.cursor().execute(statement)
        finally:
            conn.close()

    def create_database(self) -> None:
        self.drop_database()
        self._admin(f"CREATE DATABASE `{self.database}` CHARACTER SET utf8mb4")

    def drop_database(self) -> None:
        self._admin(f"DROP DATABASE IF EXISTS `{self.database}`")

    def env(self, **extra: str) -> dict[str, str]:
        return common.python_env(
            self.settings, BENCH_DATABASE_URL=f"{SERVER}/{self.database}", **extra
        )

    def versions(self) -> dict[str, str]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT VERSION(), @@innodb_flush_log_at_trx_commit")
            version, flush = cursor.fetchone()
        server = f"{version}, innodb_flush_log_at_trx_commit={flush}"
        return {**super().versions(), "MariaDB": server}

    def connection(self) -> Any:
        """The harness's own connection is PostgreSQL's; here the polls go through the ORM
        (unfinished) and need none."""
        return contextlib.nullcontext(None)

    def server_statements(self) -> int | None:
        return questions(self.database)

    def poll_backend_pid(self, conn: Any) -> int:
        return 0  # one server process for every connection: the polls are in its figure

    def reset(self) -> None:
        """Every table of the app emptied: one TRUNCATE each (MariaDB takes one table per
        statement), foreign keys unchecked meanwhile."""
        from django.apps import apps
        from django.db import connection

        models = apps.get_app_config("django_alkqueue").get_models()
        with connection.cursor() as cursor:
            cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
            try:
                for model in models:
                    if model._meta.managed:
                        cursor.execute(f"TRUNCATE {model._meta.db_table}")
            finally:
                cursor.execute("SET FOREIGN_KEY_CHECKS = 1")

    def configs(self, quick: bool) -> list[Config]:
        # synchronous_commit is PostgreSQL's setting.
        return [c for c in super().configs(quick) if "synchronous_commit" not in c.options]
