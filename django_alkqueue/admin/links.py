"""The URLs the queue pages link to one another with."""

from __future__ import annotations

from django.db.models import Model
from django.urls import NoReverseMatch, reverse


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
