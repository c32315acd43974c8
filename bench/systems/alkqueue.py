"""django-alkqueue, this project, as a user runs it: `queue(...).enqueue` / `enqueue_many`,
the `alk_worker` command, and its models to count what is left."""

from __future__ import annotations

import subprocess
from typing import Any

from django.core.management import call_command
from django.db import transaction

from .. import common
from . import Config, System, manage

QUEUE = "bench"


class AlkQueue(System):
    name = "alkqueue"
    title = "django-alkqueue"
    settings = "bench.settings.alkqueue"
    suite_settings = "bench.settings.alkqueue_admin"
    scan_n = 20_000

    @property
    def vacuum_tables(self) -> tuple[str, ...]:
        from django_alkqueue.models import QueueMessage

        return (QueueMessage._meta.db_table,)

    def install(self) -> None:
        call_command("migrate", verbosity=0)

    def versions(self) -> dict[str, str]:
        def git(*args: str) -> str:
            out = subprocess.run(["git", *args], cwd=common.ROOT, capture_output=True, text=True)
            return out.stdout.strip()

        dirty = (
            " (+ uncommitted changes)" if git("status", "--porcelain", "django_alkqueue") else ""
        )
        return {"django-alkqueue": f"{git('rev-parse', '--short', 'HEAD')}{dirty}"}

    def reset(self) -> None:
        """Every table of the app emptied (TRUNCATE: a DELETE would leave dead rows for the
        next drain's claims to walk past)."""
        from django.apps import apps
        from django.db import connection

        models = apps.get_app_config("django_alkqueue").get_models()
        tables = ", ".join(m._meta.db_table for m in models if m._meta.managed)
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {tables}")

    def _queue(self) -> Any:
        from django_alkqueue import queue

        return queue(QUEUE)

    def enqueue_one(self, payload: dict[str, Any]) -> None:
        self._queue().enqueue(payload)

    def enqueue_bulk(self, payloads: list[dict[str, Any]]) -> None:
        self._queue().enqueue_many(payloads)

    def seed(self, payloads: list[dict[str, Any]], config: Config) -> None:
        with transaction.atomic():
            self._queue().enqueue_many(payloads)

    def unfinished(self, conn: Any) -> bool:
        from django_alkqueue.models import QueueMessage

        return QueueMessage.objects.filter(queue=QUEUE).exists()

    def unfinished_count(self, conn: Any) -> int:
        from django_alkqueue.models import QueueMessage

        return QueueMessage.objects.filter(queue=QUEUE).count()

    def poll_backend_pid(self, conn: Any) -> int:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    def configs(self, quick: bool) -> list[Config]:
        def cfg(c: int, b: int | None, **extra: Any) -> Config:
            label = f"--concurrency {c}" + (f" --batch {b}" if b else "")
            if "ack_window" in extra:
                label += f", ACK_WINDOW {extra['ack_window']}"
            if "synchronous_commit" in extra:
                label += f", synchronous_commit={extra['synchronous_commit']}"
            if "consumer_batch" in extra:
                label += f", @consumer(batch={extra['consumer_batch']})"
            return Config(label, {"concurrency": c, "batch": b, **extra},
                          informational="synchronous_commit" in extra)  # fmt: skip

        if quick:  # the batch consumer too, so that CI runs its path through the harness
            return [cfg(4, 200), cfg(1, 1000, ack_window=0.0, consumer_batch=1000)]
        # Claim size raised until it stops helping; one handler thread against four, since
        # no-op jobs gain nothing from threads that share one GIL. Then a batch consumer (one
        # handler call per N jobs), the like of django-vtasks' batching option.
        return [
            cfg(4, 200), cfg(4, 100), cfg(4, 500), cfg(8, 500), cfg(4, 1000),
            cfg(4, 500, ack_window=0.0), cfg(4, 500, ack_window=0.01),
            cfg(4, 1000, ack_window=0.01), cfg(1, 1000, ack_window=0.01),
            cfg(1, 2000, ack_window=0.01),
            cfg(4, 1000, ack_window=0.0, consumer_batch=100),
            cfg(2, 1000, ack_window=0.0, consumer_batch=500),
            cfg(1, 1000, ack_window=0.0, consumer_batch=1000),
            cfg(2, 2000, ack_window=0.0, consumer_batch=1000),
            cfg(4, 500, synchronous_commit="off"),
        ]  # fmt: skip

    def worker_commands(self, processes: int, config: Config) -> list[list[str]]:
        o = config.options
        cmd = manage("alk_worker", "--queue", QUEUE, "--concurrency", str(o["concurrency"]),
                     "--processes", str(processes), "-v", "0")  # fmt: skip
        if o.get("batch"):
            cmd += ["--batch", str(o["batch"])]
        return [cmd]

    def worker_env(self, config: Config, **extra: str) -> dict[str, str]:
        o = config.options
        if "ack_window" in o:
            extra["BENCH_ACK_WINDOW"] = str(o["ack_window"])
        if "synchronous_commit" in o:
            extra["BENCH_SYNCHRONOUS_COMMIT"] = str(o["synchronous_commit"])
        if o.get("consumer_batch"):
            extra["BENCH_CONSUMER_BATCH"] = str(o["consumer_batch"])
        return self.env(**extra)
