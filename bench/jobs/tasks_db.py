"""django-tasks-db: a django.tasks task (the framework is synchronous)."""

from typing import Any

from django.tasks import task

from . import noop


@task()
def run(payload: Any) -> None:
    noop(payload)
