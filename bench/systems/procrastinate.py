"""Procrastinate with procrastinate.contrib.django: `defer` / `batch_defer`, worker
`procrastinate worker --concurrency C` (async, LISTEN/NOTIFY). Finished jobs stay as
`succeeded` (the default --delete-jobs never)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from django.core.management import call_command
from django.db import transaction

from . import Config, System, manage

TABLE = "procrastinate_jobs"


class Procrastinate(System):
    name = "procrastinate"
    title = "Procrastinate"
    settings = "bench.settings.procrastinate"
    unfinished_sql = f"SELECT 1 FROM {TABLE} WHERE status IN ('todo', 'doing') LIMIT 1"
    unfinished_count_sql = f"SELECT count(*) FROM {TABLE} WHERE status IN ('todo', 'doing')"
    reset_sql = (f"TRUNCATE {TABLE} CASCADE",)
    vacuum_tables = (TABLE,)

    def install(self) -> None:
        call_command("migrate", verbosity=0)

    def versions(self) -> dict[str, str]:
        return {"procrastinate": metadata.version("procrastinate")}

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        from bench.jobs.procrastinate_tasks import run

        run.defer(payload=payload)

    def enqueue_bulk(self, payloads: list[dict[str, Any]]) -> None:
        from bench.jobs.procrastinate_tasks import run

        run.batch_defer(*({"payload": p} for p in payloads))

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        with transaction.atomic():
            self.enqueue_bulk(payloads)

    def configs(self, quick: bool) -> list[Config]:
        def cfg(c: int) -> Config:
            return Config(f"--concurrency {c}", {"concurrency": c})

        return [cfg(10)] if quick else [cfg(10), cfg(1), cfg(30)]

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        cmd = manage("procrastinate", "worker", "--queues", "bench",
                     "--concurrency", str(config.options["concurrency"]))  # fmt: skip
        return [cmd] * processes
