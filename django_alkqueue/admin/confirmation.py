"""The page between an action and its run: what will happen and to how many rows."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse

from .selection import MAX_ACTION_ROWS, all_matching


def confirmed(request: HttpRequest) -> bool:
    return request.POST.get("confirm") == "yes"


def confirmation(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    *,
    title: str,
    question: str,
    count: int,
    button: str,
    form: Any = None,
) -> TemplateResponse:
    """The confirmation page. Its form re-posts the original action fields, plus confirm=yes
    and the form's own fields."""
    carried = [
        (key, value)
        for key in request.POST
        if key not in ("csrfmiddlewaretoken", "confirm")
        and (form is None or key not in form.fields)
        for value in request.POST.getlist(key)
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": title,
        "question": question,
        "count": count,
        "cap": MAX_ACTION_ROWS,
        "button": button,
        "form": form,
        "carried": carried,
        "matching": _filter_words(request) if all_matching(request) else None,
    }
    return TemplateResponse(request, "admin/django_alkqueue/confirm_action.html", context)


def _filter_words(request: HttpRequest) -> str:
    """The changelist filter in words: "queue = emails, reason = failed" (or "every row")."""
    words = [
        f"{'search' if key == 'q' else key} = {value}"
        for key, value in request.GET.items()
        if key not in ("p", "o", "_changelist_filters")
    ]
    return ", ".join(words) or "every row (no filter)"
