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
    """A POST naming an action of this page that the user may not run is a 403, not Django's
    quiet "No action selected": this admin's own actions and the site-wide ones (Django's
    `delete_selected`) alike. A name no page offers is left to Django's message."""
    if request.method != "POST":
        return
    asked = set(request.POST.getlist("action")) | set(request.POST.getlist(_FORM_ACTION))
    allowed = set(model_admin.get_actions(request)) | set(detail_page_actions(model_admin, request))
    if (asked & action_names(model_admin)) - allowed:
        raise PermissionDenied


def action_names(model_admin: admin.ModelAdmin[Any]) -> set[str]:
    """Every action this page could offer someone, before any permission is checked."""
    if model_admin.actions is None:  # Django's way of switching actions off on a page
        return set()
    own = {a if isinstance(a, str) else a.__name__ for a in model_admin.actions}
    return own | {name for name, _ in model_admin.admin_site.actions}


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
    return len(selected_ids(request))


def selected_ids(request: HttpRequest) -> list[str]:
    """The ids the operator ticked, as posted: some rows may be gone since."""
    return request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)


def batch(queryset: QuerySet[Any], *fields: str, order: str = "pk") -> tuple[list[Any], bool]:
    """The rows one run works on, in a stable order, and whether more rows matched: the
    values of one field (the pk by default), or tuples of several."""
    columns = fields or ("pk",)
    rows = queryset.order_by(order).values_list(*columns, flat=len(columns) == 1)
    taken = list(rows[: MAX_ACTION_ROWS + 1])
    return taken[:MAX_ACTION_ROWS], len(taken) > MAX_ACTION_ROWS


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
    *,
    count: int | None = None,
    result: str = "",
) -> LogEntry:
    """One admin log entry per action run: "verb: count noun; ids 1, 2", then what those
    rows became (" -> jobs 14, 15") and any detail. The count is len(ids) unless given: a
    run that changed nothing logs 0 with the ids it was asked for."""
    n = len(ids) if count is None else count
    noun = model._meta.verbose_name if n == 1 else model._meta.verbose_name_plural
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
