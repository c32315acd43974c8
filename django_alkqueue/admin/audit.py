"""The admin log entry each action run writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Model
from django.http import HttpRequest
from django.utils import translation


def record(
    request: HttpRequest,
    model: type[Model],
    verb: str,
    ids: Sequence[Any],
    flag: int = CHANGE,
    detail: str = "",
    *,
    count: int | None = None,
    result: str = "",
) -> LogEntry:
    """One admin log entry per action run: "verb: count noun; ids 1, 2", then what those
    rows became (" -> jobs 14, 15") and any detail. The count is len(ids) unless given: a
    run that changed nothing logs 0 with the ids it was asked for. Always in English,
    whatever the page's language: the log is an audit record that requeue_log parses."""
    n = len(ids) if count is None else count
    with translation.override(None):  # the models' verbose names untranslated
        noun = str(model._meta.verbose_name if n == 1 else model._meta.verbose_name_plural)
    summary = f"{verb}: {n} {noun}"
    message = f"{summary}; ids {', '.join(str(i) for i in ids) or 'none'}"
    message += f" -> {result}" if result else ""
    message += f". {detail}" if detail else ""
    return LogEntry.objects.create(
        user_id=request.user.pk or 0,  # admin views are for logged-in staff only
        content_type_id=ContentType.objects.get_for_model(model).pk,
        object_id=str(ids[0]) if len(ids) == 1 else None,
        object_repr=summary[:200],
        action_flag=flag,
        change_message=message,
    )
