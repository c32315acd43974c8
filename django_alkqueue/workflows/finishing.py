"""What finishing a job does to the workflows it is in: operations.py calls these in the
transaction of the ack, death, cancel or requeue, after its own statement, so that both
commit together (an ack's: operations._ack_settling)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connections

from ..jobs import Job
from ..models import BatchMember, Dependency
from ..sql import chunked, dialect_for
from . import batches, dependencies


def involved(using: str, ids: Sequence[int]) -> bool:
    """Whether any of these jobs is an unfinished batch member or has a dependent waiting
    (two index probes in one statement): what a death, cancel or requeue asks first. Acks
    need not ask: their rows' in_workflow mark says it."""
    if not ids:
        return False
    size = max(dialect_for(connections[using]).ids_per_statement // 2, 1)
    for chunk in chunked(list(ids), size):
        members = BatchMember.objects.using(using).filter(job_id__in=chunk, outcome__isnull=True)
        edges = Dependency.objects.using(using).filter(depends_on__in=chunk, met=False)
        found = members.values_list("job_id").union(edges.values_list("depends_on"), all=True)
        if found[:1]:
            return True
    return False


def succeeded(using: str, ids: Sequence[int], now: datetime) -> None:
    """The jobs were acked, their rows marked in_workflow (so no involved() probe): release
    their dependents, finish their batch members."""
    if not ids:
        return
    dependencies.succeeded(using, ids)
    batches.finished(using, ids, "succeeded", now)


def died(using: str, jobs: Sequence[Job], now: datetime) -> list[Job]:
    """The jobs became dead letters: their dependents die too ("dependency failed"), and
    every member among them is finished "dead". Returns the dependents that died."""
    if not jobs:
        return []
    causes = {job.id: f"died ({job.reason or 'dead'})" for job in jobs}
    return _failed(using, causes, now, "dead")


def cancelled(using: str, ids: Sequence[int], now: datetime) -> list[Job]:
    """The live jobs were cancelled (or purged): as died(), their members "cancelled"."""
    if not ids:
        return []
    return _failed(using, dict.fromkeys(ids, "was cancelled"), now, "cancelled")


def _failed(using: str, causes: dict[int, str], now: datetime, outcome: str) -> list[Job]:
    if not involved(using, list(causes)):
        return []
    dependents = dependencies.failed(using, causes, now)
    batches.finished(using, list(causes), outcome, now)
    batches.finished(using, [job.id for job in dependents], "dead", now)
    return dependents


def requeued(using: str, job: Job, now: datetime) -> list[int]:
    """A dead letter came back live: a batch member is unfinished again; a job with unmet
    dependencies waits again (or dies again at once when one of them is still dead); the
    jobs that died for it are returned, for the caller to requeue in turn."""
    batches.reopen(using, job.id)
    if involved(using, [job.id]):
        dependencies.mark_in_workflow(using, [job.id])
    unmet = dependencies.unmet_dependencies(using, job.id)
    if unmet:
        dependencies.park(using, job.id, now)
        dead = dependencies.dead_among(using, unmet)
        if dead:
            dependents = dependencies.failed_now(using, job.id, dead, now)
            batches.finished(using, [j.id for j in dependents], "dead", now)
    return dependencies.died_for(using, job.id)
