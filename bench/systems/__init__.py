"""The systems under test, one module each, all behind the small interface of `System`.

A system's module is imported only inside that system's own suite process (bench/suite.py),
because each Django-based system configures Django with its own settings.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import psycopg

from .. import common

#: name -> (module, class): the order is the order of the run and of the tables.
SYSTEMS = {
    "raw": "bench.systems.raw:Raw",
    "alkqueue": "bench.systems.alkqueue:AlkQueue",
    "raw_mariadb": "bench.systems.raw_mariadb:RawMariaDB",
    "alkqueue_mariadb": "bench.systems.alkqueue_mariadb:AlkQueueMariaDB",
    "raw_sqlite": "bench.systems.raw_sqlite:RawSQLite",
    "alkqueue_sqlite": "bench.systems.alkqueue_sqlite:AlkQueueSQLite",
    "django_tasks_db": "bench.systems.django_tasks_db:DjangoTasksDb",
    "procrastinate": "bench.systems.procrastinate:Procrastinate",
    "vtasks": "bench.systems.vtasks:VTasks",
    "celery_redis_prefork": "bench.systems.celery:CeleryRedisPrefork",
    "celery_redis_threads": "bench.systems.celery:CeleryRedisThreads",
    "celery_rabbitmq_prefork": "bench.systems.celery:CeleryRabbitPrefork",
    "celery_rabbitmq_threads": "bench.systems.celery:CeleryRabbitThreads",
}


class NotSupported(Exception):
    """The system has no API for this (e.g. no bulk enqueue)."""


@dataclasses.dataclass(frozen=True)
class Config:
    """One worker configuration: its label in the tables and what it sets."""

    label: str
    options: dict[str, Any]
    #: Not eligible as the "best" configuration (e.g. trades durability for speed).
    informational: bool = False


class System:
    name = ""
    title = ""
    #: DJANGO_SETTINGS_MODULE of the system's workers; None for the raw psycopg loops.
    settings: str | None = None
    #: Settings of the suite process itself (enqueues, polls), when they differ.
    suite_settings: str | None = None
    #: Every configuration is measured in full (raw: claim 1 and 100 per tx), not scanned.
    variants = False
    #: Jobs per drain of the configuration scan.
    scan_n = 5_000
    #: SQL: one row if any job is not finished yet (polled to detect the end of a drain).
    unfinished_sql = ""
    #: SQL: how many jobs are not finished yet (for progress and error messages).
    unfinished_count_sql = ""
    #: SQL run before each measurement to start from empty tables.
    reset_sql: tuple[str, ...] = ()
    #: The tables a drain churns, vacuumed by the harness's stand-in for autovacuum.
    vacuum_tables: tuple[str, ...] = ()
    #: The database server: its processes' name (their CPU is the server figure) and the
    #: port a started worker holds a connection to.
    server_process = "postgres"
    server_port = 5432
    #: The server's parent process (a cluster of the script's own, bench/own_cluster.py): only
    #: its children count. None: every process named server_process.
    server_parent: int | None = None

    def __init__(self) -> None:
        self.database = common.PREFIX + self.name

    # -- set-up, in the suite process ------------------------------------------------------

    def create_database(self) -> None:
        """A fresh, empty database for the run (dropped first if a previous run left it)."""
        common.create_database(self.database)

    def drop_database(self) -> None:
        common.drop_database(self.database)

    def install(self) -> None:
        """Create the schema in the (fresh) database."""
        raise NotImplementedError

    def versions(self) -> dict[str, str]:
        return {}

    def env(self, **extra: str) -> dict[str, str]:
        return common.python_env(
            self.settings, BENCH_DATABASE_URL=common.db_url(self.database), **extra
        )

    def suite_env(self) -> dict[str, str]:
        env = self.env()
        if self.suite_settings:
            env["DJANGO_SETTINGS_MODULE"] = self.suite_settings
        return env

    def connection(self) -> psycopg.Connection[Any]:
        return common.connect(self.database)

    def reconnect(self) -> None:
        """Drop the connections a server restart broke (the next use opens new ones)."""
        if self.settings:
            from django.db import connections

            for conn in connections.all(initialized_only=True):
                try:
                    conn.close()
                except Exception:
                    conn.connection = None

    def reset(self) -> None:
        with self.connection() as conn:
            for sql in self.reset_sql:
                conn.execute(sql)

    # -- enqueue ---------------------------------------------------------------------------

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        """One job, in its own transaction."""
        raise NotImplementedError

    def enqueue_bulk(self, payloads: list[dict[str, Any]]) -> None:
        """Many jobs through the system's bulk API; NotSupported when it has none."""
        raise NotSupported

    def enqueue_for_latency(self, payload: dict[str, Any], config: Config) -> None:
        """One job for the pickup-latency run, routed to the queue `config` serves."""
        self.enqueue_one(payload)

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        """Make `payloads` visible to workers in one commit (the start of a drain)."""
        raise NotImplementedError

    # -- workers ---------------------------------------------------------------------------

    def configs(self, quick: bool) -> list[Config]:
        """The configurations the scan tries; the first is the one used without a scan."""
        raise NotImplementedError

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        raise NotImplementedError

    def worker_env(self, config: Config, **extra: str) -> dict[str, str]:
        return self.env(**extra)

    def unfinished(self, conn: psycopg.Connection[Any]) -> bool:
        return conn.execute(self.unfinished_sql).fetchone() is not None

    def unfinished_count(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(self.unfinished_count_sql).fetchone()
        return int(row[0]) if row else 0

    def server_statements(self) -> int | None:
        """The statements the server has run so far, all sessions (MariaDB's `Questions`);
        None where the harness does not count them."""
        return None

    def workers_ready(self, workers: common.Workers) -> bool:
        """Every worker process has started (holds a connection to the server)."""
        return workers.connected(self.server_port)

    def poll_backend_pid(self, conn: psycopg.Connection[Any]) -> int:
        """The server process that answers `unfinished` (its CPU is the harness's)."""
        return conn.info.backend_pid


def load(name: str) -> System:
    module, cls = SYSTEMS[name].split(":")
    return getattr(importlib.import_module(module), cls)()  # type: ignore[no-any-return]


def manage(*args: str) -> list[str]:
    """A management command of the suite's Django settings, run by this venv's Python."""
    return [common.PYTHON, "-m", "django", *args]
