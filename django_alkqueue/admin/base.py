"""The ModelAdmin every queue page shares: read-only rows, cheap counts, no facet counts,
changelists that leave payloads and tracebacks in the database, and the 403 on actions the
user may not run."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from .actions import refuse_forbidden_action
from .counts import EstimatedCountPaginator

M = TypeVar("M", bound=Model)

#: Characters of a payload shown on a detail page.
PAYLOAD_SHOWN = 200_000


class LeanChangeList(ChangeList):
    """Loads only the columns a changelist shows (see QueueAdmin.changelist_columns)."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        queryset = super().get_queryset(request, exclude_parameters)
        return self.model_admin.lean(queryset)  # type: ignore[attr-defined, no-any-return]


class QueueAdmin(admin.ModelAdmin[M]):
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedCountPaginator
    list_per_page = 50
    #: Heavy columns a changelist never loads.
    changelist_defer: tuple[str, ...] = ()

    def lean(self, queryset: QuerySet[M]) -> QuerySet[M]:
        return queryset.defer(*self.changelist_defer) if self.changelist_defer else queryset

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return LeanChangeList

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False  # rows change through actions only; the detail page is read-only

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        refuse_forbidden_action(self, request)
        return super().changelist_view(request, extra_context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        refuse_forbidden_action(self, request)
        return super().change_view(request, object_id, form_url, extra_context)


def pretty_json(value: Any) -> SafeString:
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    if len(text) > PAYLOAD_SHOWN:
        text = text[:PAYLOAD_SHOWN] + f"\n... ({len(text) - PAYLOAD_SHOWN:,} more characters)"
    return format_html('<pre class="alk-pre">{}</pre>', text)


def preformatted(text: str | None) -> SafeString | str:
    return format_html('<pre class="alk-pre">{}</pre>', text) if text else "-"


def format_age(seconds: float) -> str:
    """12 s, 3 min 20 s, 2 h 5 min, 3 d 4 h."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"
