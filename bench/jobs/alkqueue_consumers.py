"""django-alkqueue: the bench queue's consumer."""

from typing import Any

from django_alkqueue import Job, consumer

from . import noop


@consumer("bench")
def run(payload: Any, job: Job) -> None:
    noop(payload)
