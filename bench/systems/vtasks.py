"""django-vtasks with its database backend: `enqueue` / backend `enqueue_many`, worker
`runworker --concurrency C` (asyncio; polls the table, backing off from 0.1 s to 1 s when
idle). Its batching option (a queue whose task receives up to `count` fetched tasks at
once) is tried as a configuration of its own. Finished tasks are deleted."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from django.core.management import call_command
from django.db import transaction

from . import Config, System, manage

TABLE = "db_queuedtask"


class VTasks(System):
    name = "vtasks"
    title = "django-vtasks"
    settings = "bench.settings.vtasks"
    unfinished_sql = f"SELECT 1 FROM {TABLE} WHERE status <> 'FAILED' LIMIT 1"
    unfinished_count_sql = f"SELECT count(*) FROM {TABLE} WHERE status <> 'FAILED'"
    reset_sql = (f"TRUNCATE {TABLE}", "TRUNCATE db_vtaskmetadata")
    vacuum_tables = (TABLE,)

    def install(self) -> None:
        call_command("migrate", verbosity=0)

    def versions(self) -> dict[str, str]:
        return {"django-vtasks": metadata.version("django-vtasks")}

    def _task(self, config: Config | None = None) -> Any:
        from bench.jobs.vtasks_tasks import run, run_batch

        return run_batch if config is not None and config.options.get("batch") else run

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        self._task().enqueue(payload)

    def enqueue_bulk(self, payloads: list[dict[str, Any]], config: Config | None = None) -> None:
        task = self._task(config)
        task.get_backend().enqueue_many([(task, (p,), {}) for p in payloads])

    def enqueue_for_latency(self, payload: dict[str, Any], config: Config | None = None) -> None:
        self._task(config).enqueue(payload)

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        with transaction.atomic():
            self.enqueue_bulk(payloads, config)

    def configs(self, quick: bool) -> list[Config]:
        def cfg(c: int, batch: int | None = None) -> Config:
            label = f"--concurrency {c}" + (f", batch queue count {batch}" if batch else "")
            return Config(label, {"concurrency": c, "batch": batch})

        if quick:
            return [cfg(20)]
        # The batch count raised until it stops helping (the scan in docs/benchmarks.md).
        return [cfg(20), cfg(100), cfg(20, 100), cfg(20, 500), cfg(20, 1000), cfg(20, 2000),
                cfg(20, 5000)]  # fmt: skip

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        queue = "bench_batch" if config.options.get("batch") else "bench"
        cmd = manage("runworker", "--queue", queue,
                     "--concurrency", str(config.options["concurrency"]))  # fmt: skip
        return [cmd] * processes

    def worker_env(self, config: Config, **extra: str) -> dict[str, str]:
        if config.options.get("batch"):
            extra["BENCH_VTASKS_BATCH"] = str(config.options["batch"])
        return self.env(**extra)
