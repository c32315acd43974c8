"""What every operator action shares: the permission gate, the confirmation page, the cap on
rows per run, and the admin log entry. The actions themselves live beside their ModelAdmin
and each calls one function of `operations`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.contrib.admin import ActionLocation, helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

#: Rows one action run touches at most; the message says so when more matched.
MAX_ACTION_ROWS = 10_000

#: Actions offered on the changelist and on the detail page of one object.
BOTH_PLACES = [ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM]

_FORM_ACTION = f"{ActionLocation.CHANGE_FORM.value}-action"
_FORM_SELECT_ACROSS = f"{ActionLocation.CHANGE_FORM.value}-select_across"


def has_perm(request: HttpRequest, model: type[Model], codename: str) -> bool:
    return request.user.has_perm(f"{model._meta.app_label}.{codename}")


def refuse_forbidden_action(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> None:
    """A POST naming one of this admin's actions that the user may not run is a 403, not
    Django's quiet "No action selected"."""
    if request.method != "POST":
        return
    asked = set(request.POST.getlist("action")) | set(request.POST.getlist(_FORM_ACTION))
    ours = {a if isinstance(a, str) else a.__name__ for a in model_admin.actions or ()}
    allowed = set(model_admin.get_actions(request)) | set(
        model_admin.get_actions(request, action_location=ActionLocation.CHANGE_FORM)
    )
    if (asked & ours) - allowed:
        raise PermissionDenied


def all_matching(request: HttpRequest) -> bool:
    """True when the operator chose every row matching the filter, not a selection."""
    return request.POST.get("select_across") == "1" and _FORM_SELECT_ACROSS not in request.POST


def confirmed(request: HttpRequest) -> bool:
    return request.POST.get("confirm") == "yes"


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
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
    }
    return TemplateResponse(request, "admin/django_alkqueue/confirm_action.html", context)


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
        user_id=request.user.pk,
        content_type_id=ContentType.objects.get_for_model(model).pk,
        object_id=str(ids[0]) if len(ids) == 1 else None,
        object_repr=summary[:200],
        action_flag=flag,
        change_message=message + (f". {detail}" if detail else ""),
    )
