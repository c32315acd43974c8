"""The leader's workflow sweep: what a crash between two transactions can leave behind.

Acks, deaths, cancels and requeues settle their workflows in their own transaction, so
this is a backstop, not a step of the normal path. The deaths a claim makes are settled in
a transaction right after its statement (a claim commits alone: a transaction around it
would cost every claim a round trip). This sweep settles what a crash between those two
left, and whatever else a bug or a hand-edited row left behind: an unmet edge to a job
that is neither live nor dead (it succeeded), a member whose job is gone, a sealed batch
whose members have all finished. It also deletes the edges of dependents that are neither
live nor dead any more."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef

from ..models import Batch, BatchMember, DeadLetter, Dependency, QueueMessage
from . import batches, dependencies

#: Rows one pass looks at per kind: the sweep catches up over its next passes.
SWEEP_LIMIT = 1_000


def any_open(using: str) -> bool:
    """Whether any workflow could be touched: an edge, or an unfired batch."""
    if Dependency.objects.using(using).exists():
        return True
    return Batch.objects.using(using).filter(fired_at__isnull=True).exists()


def run(using: str, now: datetime) -> int:
    """One pass; returns how many things it settled."""
    settled = _met_edges(using, now)
    settled += _finished_members(using, now)
    settled += _due_batches(using, now)
    _forget_edges(using)
    return settled


def _live(using: str, column: str) -> Exists:
    return Exists(QueueMessage.objects.using(using).filter(pk=OuterRef(column)))


def _dead(using: str, column: str) -> Exists:
    return Exists(DeadLetter.objects.using(using).filter(job_id=OuterRef(column)))


def _met_edges(using: str, now: datetime) -> int:
    """Unmet edges to jobs gone without a dead letter: those jobs succeeded."""
    edges = Dependency.objects.using(using).filter(met=False)
    gone = edges.filter(~_live(using, "depends_on"), ~_dead(using, "depends_on"))
    ids = sorted(set(gone.values_list("depends_on", flat=True)[:SWEEP_LIMIT]))
    if ids:
        with transaction.atomic(using=using):
            dependencies.succeeded(using, ids)
    return len(ids)


def _finished_members(using: str, now: datetime) -> int:
    """Unfinished members of open batches whose job is gone: dead if a dead letter holds it,
    else succeeded."""
    members = BatchMember.objects.using(using).filter(
        outcome__isnull=True, batch__fired_at__isnull=True
    )
    gone = members.filter(~_live(using, "job_id")).annotate(dead=_dead(using, "job_id"))
    found = list(gone.values_list("job_id", "dead")[:SWEEP_LIMIT])
    if not found:
        return 0
    with transaction.atomic(using=using):
        batches.finished(using, [job_id for job_id, dead in found if not dead], "succeeded", now)
        batches.finished(using, [job_id for job_id, dead in found if dead], "dead", now)
    return len(found)


def _due_batches(using: str, now: datetime) -> int:
    """Sealed, unfired batches with no unfinished member: fire them."""
    open_batches = Batch.objects.using(using).filter(sealed_at__isnull=False, fired_at__isnull=True)
    unfinished = BatchMember.objects.using(using).filter(batch=OuterRef("pk"), outcome__isnull=True)
    due = open_batches.filter(~Exists(unfinished)).values_list("pk", flat=True)[:SWEEP_LIMIT]
    fired = 0
    for batch_id in list(due):
        with transaction.atomic(using=using):
            fired += batches.fire_if_done(using, batch_id, now)
    return fired


def _forget_edges(using: str) -> None:
    """Edges of dependents neither live nor dead: nothing can wait on them again."""
    edges = Dependency.objects.using(using)
    done = edges.filter(~_live(using, "job_id"), ~_dead(using, "job_id"))
    ids = list(done.values_list("pk", flat=True)[:SWEEP_LIMIT])
    if ids:
        edges.filter(pk__in=ids).delete()


__all__ = ["any_open", "run"]
