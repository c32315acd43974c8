"""Plain django.tasks tasks: they run on django-alkqueue through the TASKS setting alone."""

from __future__ import annotations

import asyncio
from typing import Any

from django_alkqueue.tasks_compat import TaskContext
from testproject.shop.models import HandlerRun

try:
    from django.tasks import task
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import task  # type: ignore[no-redef]


@task()
def add(a: int, b: int) -> int:
    return a + b


@task()
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@task(queue_name="tasks-high", priority=10)
def urgent(label: str) -> str:
    HandlerRun.objects.create(queue="tasks-high", job_id=0, attempt=0, note=label)
    return label


@task()
def record(label: str) -> None:
    """Leaves a row, so tests see the order in which tasks ran."""
    HandlerRun.objects.create(queue="default", job_id=0, attempt=0, note=label)


@task()
async def async_double(n: int) -> int:
    await asyncio.sleep(0)
    return n * 2


@task(takes_context=True)
def flaky(context: TaskContext, succeed_on: int) -> int:
    """Fails until its `succeed_on`-th attempt; returns the attempt it succeeded on."""
    HandlerRun.objects.create(
        queue="default", job_id=int(context.task_result.id), attempt=context.attempt,
        note="flaky",
    )  # fmt: skip
    if context.attempt < succeed_on:
        raise ValueError(f"not yet (attempt {context.attempt})")
    return int(context.attempt)


@task()
def always_fails() -> None:
    raise RuntimeError("this task always fails")


@task()
def returns_non_json() -> object:
    return object()


@task()
def slow(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@task()
def returns_nul() -> dict[str, str]:
    """A result with NUL characters, which PostgreSQL's jsonb refuses: kept escaped."""
    return {"s": "a\x00b", "k\x00": "v"}


@task()
def fails_with_nul() -> None:
    raise ValueError("a message with a \x00 NUL")


@task()
def returns_nan() -> float:
    return float("nan")


def _noted(job_id: int, note: str) -> str:
    HandlerRun.objects.create(queue="default", job_id=job_id, attempt=0, note=note)
    return note


@task(takes_context=True)
def stepped(context: Any, n: int) -> list[str]:
    """Two durable steps through the context's job (docs/tasks.md, "Durable steps"); its
    first attempt fails between them, so the retry must find the first recorded."""
    job_id = int(context.task_result.id)
    first = context.job.step("first", _noted, job_id, f"ran first {n}")
    if context.attempt == 1:
        raise ValueError("after the first step")
    second = context.job.step("second", _noted, job_id, f"ran second {n}")
    return [first, second]
