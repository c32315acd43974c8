"""The admin's requeue log: a requeue's entry on the dead letters, as the logged-in user, and
the way back from a live job to the dead letter it was requeued from (audit.py writes and
reads the entries, for alk_jobs too)."""

from __future__ import annotations

from django.contrib.admin.models import LogEntry
from django.http import HttpRequest

from ..audit import Origin, requeued_from
from ..audit import record_requeue as audit_record_requeue
from ..operations import RequeueRun
from .audit import actor

__all__ = ["Origin", "RequeueRun", "record_requeue", "requeued_from"]


def record_requeue(request: HttpRequest, run: RequeueRun) -> LogEntry:
    """One entry under DeadLetter, the page the action ran from, even when nothing could be
    requeued (count 0, with the ids asked for): the audit shows every attempt."""
    entry: LogEntry = audit_record_requeue(actor(request), run)
    return entry
