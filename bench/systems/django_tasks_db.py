"""django-tasks-db: Django's django.tasks with the ORM database backend; worker `db_worker`.

It has no bulk enqueue and no concurrency knob: one task per loop in one thread, so the
scaling knob is the number of processes. Finished tasks stay in the table as SUCCESSFUL.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from django.core.management import call_command
from django.db import transaction

from . import Config, System, manage

TABLE = "django_tasks_database_dbtaskresult"


class DjangoTasksDb(System):
    name = "django_tasks_db"
    title = "django-tasks-db"
    settings = "bench.settings.tasks_db"
    unfinished_sql = f"SELECT 1 FROM {TABLE} WHERE status IN ('READY', 'RUNNING') LIMIT 1"
    unfinished_count_sql = f"SELECT count(*) FROM {TABLE} WHERE status IN ('READY', 'RUNNING')"
    reset_sql = (f"TRUNCATE {TABLE}",)
    vacuum_tables = (TABLE,)

    def install(self) -> None:
        call_command("migrate", verbosity=0)

    def versions(self) -> dict[str, str]:
        return {"django-tasks-db": metadata.version("django-tasks-db")}

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        from bench.jobs.tasks_db import run

        run.enqueue(payload)

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        from bench.jobs.tasks_db import run

        with transaction.atomic():
            for payload in payloads:
                run.enqueue(payload)

    def configs(self, quick: bool) -> list[Config]:
        return [Config("package defaults (1 thread, --interval 1)", {})]

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        return [manage("db_worker", "--queue-name", "default", "-v", "0")] * processes
