"""django-vtasks: async tasks (its worker is asyncio-first). `run_batch` serves a queue with
vtasks' batching option, whose task receives the list of fetched task dicts."""

from typing import Any

from django_vtasks import task

from . import noop


@task(queue_name="bench")
async def run(payload: Any) -> None:
    noop(payload)


@task(queue_name="bench_batch")
async def run_batch(tasks: list[dict[str, Any]]) -> None:
    for item in tasks:
        noop(item["args"][0])
