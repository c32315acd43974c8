"""The page between an action and its run: what will happen and to how many rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.functional import Promise
from django.utils.translation import gettext as _

from .selection import MAX_ACTION_ROWS, all_matching

StrOrPromise = str | Promise


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
    words: Mapping[str, StrOrPromise] | None = None,
    values: Mapping[str, Callable[[str], str]] | None = None,
) -> TemplateResponse:
    """The confirmation page. Its form re-posts the original action fields, plus confirm=yes
    and the form's own fields. `words` names filter parameters in words and `values` turns
    their values into words (an error group's fingerprint into its title)."""
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
        # The noun that goes with the count, in the page's language ("1 job", "2 jobs").
        "noun": model_admin.opts.verbose_name
        if count == 1
        else model_admin.opts.verbose_name_plural,
        "cap": MAX_ACTION_ROWS,
        "button": button,
        "form": form,
        "carried": carried,
        "matching": _filter_words(request, words or {}, values or {})
        if all_matching(request)
        else None,
    }
    return TemplateResponse(request, "admin/django_alkqueue/confirm_action.html", context)


def _filter_words(
    request: HttpRequest,
    words: Mapping[str, StrOrPromise],
    values: Mapping[str, Callable[[str], str]],
) -> str:
    """The changelist filter in words: "queue = emails, reason = failed" (or "every row")."""
    named: dict[str, StrOrPromise] = {"q": _("search"), **words}
    shown = [
        f"{named.get(key, key)} = {values[key](str(value)) if key in values else value}"
        for key, value in request.GET.items()
        if key not in ("p", "o", "_changelist_filters")
    ]
    return ", ".join(shown) or _("every row (no filter)")
