"""The URLs the queue pages link to one another with."""

from __future__ import annotations

from django.db.models import Model
from django.urls import NoReverseMatch, reverse

from ..jobs import LIVE_STATES
from ..workflows.standing import Standing


def changelist_url(model: type[Model], query: str = "") -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return f"{url}?{query}" if query else url


def queue_page_url(name: str) -> str | None:
    """The queue page of `name`, or None when the name cannot be a URL segment (empty, or
    holding a "/": rows written by hand or by an older version): pages show such a name
    unlinked instead of failing."""
    try:
        return reverse("admin:django_alkqueue_queuestat_queue", args=[name])
    except NoReverseMatch:
        return None


def job_page_url(standing: Standing) -> str | None:
    """The page of a job wherever it stands now: its live job's, its dead letter's or its
    finished job's; None when no table holds it any more."""
    if standing.dead_letter_id is not None:
        return reverse("admin:django_alkqueue_deadletter_change", args=[standing.dead_letter_id])
    if standing.kept:
        return reverse("admin:django_alkqueue_finishedjob_change", args=[standing.job_id])
    if standing.state in LIVE_STATES:
        return reverse("admin:django_alkqueue_queuemessage_change", args=[standing.job_id])
    return None
