"""What every operator action shares: the permission gate, the confirmation page, the cap on
rows per run, and the admin log entry. The actions themselves live beside their ModelAdmin
and each calls one function of `operations`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from .compat import BOTH_PLACES, FORM_ACTION, FORM_SELECT_ACROSS, detail_page_actions

__all__ = ["BOTH_PLACES"]

#: Rows one action run touches at most; the message says so when more matched.
MAX_ACTION_ROWS = 10_000

_FORM_ACTION = FORM_ACTION
_FORM_SELECT_ACROSS = FORM_SELECT_ACROSS


def has_perm(request: HttpRequest, model: type[Model], codename: str) -> bool:
    return request.user.has_perm(f"{model._meta.app_label}.{codename}")


def refuse_forbidden_action(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> None:
    """A POST naming one of this admin's actions that the user may not run is a 403, not
    Django's quiet "No action selected"."""
    if request.method != "POST":
        return
    asked = set(request.POST.getlist("action")) | set(request.POST.getlist(_FORM_ACTION))
    ours = {a if isinstance(a, str) else a.__name__ for a in model_admin.actions or ()}
    allowed = set(model_admin.get_actions(request)) | set(detail_page_actions(model_admin, request))
    if (asked & ours) - allowed:
        raise PermissionDenied


def all_matching(request: HttpRequest) -> bool:
    """True when the operator chose every row matching the filter, not a selection."""
    return request.POST.get("select_across") == "1" and _FORM_SELECT_ACROSS not in request.POST


def from_detail_page(request: HttpRequest) -> bool:
    """True when the action was run from an object's detail page (Django's change-form
    actions), whose object may be gone afterwards."""
    return _FORM_ACTION in request.POST


def changelist_url(model: type[Model], query: str = "") -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return f"{url}?{query}" if query else url


def confirmed(request: HttpRequest) -> bool:
    return request.POST.get("confirm") == "yes"


def selection_count(request: HttpRequest, queryset: QuerySet[Any]) -> int:
    """How many rows a run would touch: the selection, or every row matching the filter."""
    if all_matching(request):
        return queryset.count()
    return len(request.POST.getlist(helpers.ACTION_CHECKBOX_NAME))


def batch(queryset: QuerySet[Any], field: str = "pk", order: str = "pk") -> tuple[list[Any], bool]:
    """The ids one run works on, in a stable order, and whether more rows matched."""
    ids = list(queryset.order_by(order).values_list(field, flat=True)[: MAX_ACTION_ROWS + 1])
    return ids[:MAX_ACTION_ROWS], len(ids) > MAX_ACTION_ROWS


def more_note(more: bool) -> str:
    if not more:
        return ""
    return (
        f" More than {MAX_ACTION_ROWS:,} rows matched; this run handled the first "
        f"{MAX_ACTION_ROWS:,}. Run the action again for the rest."
    )


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
    """The page between the action and its run: what will happen and to how many rows. Its
    form re-posts the original action fields, plus confirm=yes and the form's own fields."""
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


def record(
    request: HttpRequest,
    model: type[Model],
    verb: str,
    ids: Sequence[Any],
    flag: int = CHANGE,
    detail: str = "",
) -> LogEntry:
    """One admin log entry per action run: the verb, the count and the ids."""
    noun = model._meta.verbose_name if len(ids) == 1 else model._meta.verbose_name_plural
    summary = f"{verb}: {len(ids)} {noun}"
    message = f"{summary}; ids {', '.join(str(i) for i in ids)}"
    return LogEntry.objects.create(
        user_id=request.user.pk or 0,  # admin views are for logged-in staff only
        content_type_id=ContentType.objects.get_for_model(model).pk,
        object_id=str(ids[0]) if len(ids) == 1 else None,
        object_repr=summary[:200],
        action_flag=flag,
        change_message=message + (f". {detail}" if detail else ""),
    )
