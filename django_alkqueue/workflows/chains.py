"""`chain(a, b, c)`: each job waits for the one before it. Sugar over `after=`."""

from __future__ import annotations

from django.db import transaction

from ..jobs import Job
from .specs import JobSpec, checked_specs


def chain(*specs: JobSpec) -> list[Job]:
    """Enqueue the jobs (built with Queue.job()) in one transaction, each after the one
    before; returns them in order. InvalidOption, and nothing written, for a bad one."""
    checked = checked_specs(specs, "chain()")
    jobs: list[Job] = []
    with transaction.atomic(using=checked[0].using):
        for spec in checked:
            jobs.append(spec.enqueue(after=jobs[-1:] or None))
    return jobs
