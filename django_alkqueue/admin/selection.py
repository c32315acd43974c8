"""The rows an action works on: the ticked ids or every row matching the filter, taken in
bounded batches (MAX_ACTION_ROWS per run)."""

from __future__ import annotations

from typing import Any

from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.formats import number_format
from django.utils.translation import gettext as _

from .compat import FORM_ACTION, FORM_SELECT_ACROSS

#: Rows one action run touches at most; the message says so when more matched.
MAX_ACTION_ROWS = 10_000


def all_matching(request: HttpRequest) -> bool:
    """True when the operator chose every row matching the filter, not a selection."""
    return request.POST.get("select_across") == "1" and FORM_SELECT_ACROSS not in request.POST


def from_detail_page(request: HttpRequest) -> bool:
    """True when the action was run from an object's detail page (Django's change-form
    actions), whose object may be gone afterwards."""
    return FORM_ACTION in request.POST


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
    text = _(
        " More than %(cap)s rows matched; this run handled the first %(cap)s. Run the action "
        "again for the rest."
    )
    return text % {"cap": number_format(MAX_ACTION_ROWS, force_grouping=True)}
