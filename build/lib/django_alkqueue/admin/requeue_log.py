"""The admin log of requeues: one LogEntry on the dead letters per run, and the way back
from a live job to the dead letter it was requeued from.

A requeued job keeps the id it had, and no column of the live table remembers where it came
from; the log entry does: "requeue: 2 dead letters; ids 3, 4 -> jobs 14, 15". Writing and
reading that line live here, side by side, so that the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from django.contrib.admin.models import LogEntry
from django.http import HttpRequest

from ..models import DeadLetter
from .actions import record

VERB = "requeue"
#: What comes between the dead letter ids and the job ids they became.
_BECAME = " -> jobs "


@dataclasses.dataclass(frozen=True)
class RequeueRun:
    """What one run of the requeue action did, dead letter by dead letter."""

    #: The dead letter ids the run was asked for.
    asked: list[int]
    #: (dead letter id, id of the live job it became): the same id the job had before.
    requeued: list[tuple[int, int]]
    #: (dead letter id, live job holding its unique key): these stay dead letters.
    kept: list[tuple[int, int]]
    #: Dead letter ids someone else requeued or deleted first.
    gone: list[int]


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a live job came from: the dead letter, when and by whom it was requeued."""

    dead_letter_id: int
    at: datetime
    by: str


def record_requeue(request: HttpRequest, run: RequeueRun) -> LogEntry:
    """One entry under DeadLetter, the page the action ran from, even when nothing could be
    requeued (count 0, with the ids asked for): the audit shows every attempt."""
    others = _others(run)
    if not run.requeued:
        return record(request, DeadLetter, VERB, run.asked, count=0, detail=others)
    dead_ids = [dead for dead, _ in run.requeued]
    jobs = ", ".join(str(job) for _, job in run.requeued)
    return record(request, DeadLetter, VERB, dead_ids, result=f"jobs {jobs}", detail=others)


def _others(run: RequeueRun) -> str:
    parts = []
    if run.kept:
        held = ", ".join(f"{dead} (job {holder})" for dead, holder in run.kept)
        parts.append(f"kept, a live job holds the unique key: ids {held}")
    if run.gone:
        parts.append(f"already gone: ids {', '.join(str(dead) for dead in run.gone)}")
    return "; ".join(parts)


def requeued_from(job_id: int) -> Origin | None:
    """The latest requeue that made `job_id` live again, or None (never requeued, or requeued
    outside the admin). One query: the content type narrows it to the dead letters' entries
    through the log's content_type index, the pattern picks the runs naming this job."""
    pattern = rf"^{VERB}: .*{_BECAME}([0-9]+, )*{int(job_id)}([^0-9]|$)"
    entry = (
        LogEntry.objects.filter(
            content_type__app_label=DeadLetter._meta.app_label,
            content_type__model=DeadLetter._meta.model_name,
            change_message__regex=pattern,
        )
        .select_related("user")
        .order_by("-action_time", "-id")
        .first()
    )
    if entry is None:
        return None
    dead_letter_id = _dead_letter_of(entry.change_message, job_id)
    return Origin(dead_letter_id, entry.action_time, entry.user.get_username())


def _dead_letter_of(message: str, job_id: int) -> int:
    """In "...; ids 3, 4 -> jobs 14, 15. detail", the dead letter id paired with job_id."""
    head, _, tail = message.partition(_BECAME)
    dead_ids = head.rsplit("; ids ", 1)[1].split(", ")
    jobs = tail.split(".", 1)[0].split(", ")
    return int(dead_ids[jobs.index(str(job_id))])
