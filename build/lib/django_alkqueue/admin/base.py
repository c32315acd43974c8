"""The ModelAdmin every queue page shares: read-only rows, cheap counts, no facet counts,
changelists that leave payloads and tracebacks in the database, and the 403 on actions the
user may not run."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import FieldDoesNotExist
from django.db.models import IntegerField, Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timezone import localtime

from .actions import refuse_forbidden_action
from .counts import EstimatedCountPaginator

M = TypeVar("M", bound=Model)

#: Characters of a payload shown on a detail page.
PAYLOAD_SHOWN = 200_000


if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin
else:

    class ModelAdmin(admin.ModelAdmin):
        """Subscriptable at run time too, as django-stubs declares it (no django_stubs_ext)."""

        def __class_getitem__(cls, item: object) -> type:
            return cls


def fits_bigint(text: str) -> bool:
    """True for an integer every id column can hold (SQLite refuses larger ones outright)."""
    try:
        return -(2**63) <= int(text) < 2**63
    except ValueError:
        return False


class LeanChangeList(ChangeList):
    """Loads only the columns a changelist shows (QueueAdmin.lean), and turns a lookup on an
    integer column with a value past 64 bits into Django's "invalid lookup" redirect."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        self._refuse_huge_integers(self.get_filters_params())
        queryset = super().get_queryset(request, exclude_parameters)
        return self.model_admin.lean(queryset)  # type: ignore[attr-defined, no-any-return]

    def _refuse_huge_integers(self, params: dict[str, Any]) -> None:
        for key, values in params.items():
            try:
                field = self.model._meta.get_field(key.split("__", 1)[0])
            except FieldDoesNotExist:
                continue
            if not isinstance(field, IntegerField):
                continue
            for value in values if isinstance(values, list) else [values]:
                for part in str(value).split(","):
                    if part.strip().lstrip("-").isdigit() and not fits_bigint(part):
                        raise IncorrectLookupParameters(f"{key}: {part[:30]} is out of range")


class QueueAdmin(ModelAdmin[M]):
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = EstimatedCountPaginator
    list_per_page = 50
    #: Heavy columns a changelist never loads.
    changelist_defer: tuple[str, ...] = ()
    #: Search matches the whole term exactly against each of search_fields (an index
    #: lookup), instead of Django's per-word icontains (a table scan).
    exact_search = False

    class Media:
        css = {"all": ("django_alkqueue/admin.css",)}

    def lean(self, queryset: QuerySet[M]) -> QuerySet[M]:
        return queryset.defer(*self.changelist_defer) if self.changelist_defer else queryset

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[M], search_term: str
    ) -> tuple[QuerySet[M], bool]:
        term = search_term.strip()
        if not self.exact_search or not term:
            return super().get_search_results(request, queryset, search_term)
        match = Q()
        for name in self.get_search_fields(request):
            if not isinstance(self.model._meta.get_field(name), IntegerField):
                match |= Q(**{name: term})
            elif fits_bigint(term):
                match |= Q(**{name: int(term)})
        return (queryset.filter(match) if match else queryset.none()), False

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
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) > PAYLOAD_SHOWN:
        text = text[:PAYLOAD_SHOWN] + f"\n... ({len(text) - PAYLOAD_SHOWN:,} more characters)"
    return format_html('<pre class="alk-pre">{}</pre>', text)


def preformatted(text: str | None) -> SafeString | str:
    return format_html('<pre class="alk-pre">{}</pre>', text) if text else "-"


def timestamp(at: datetime | None) -> str:
    """2030-01-01 12:00:05 in the current time zone; "-" for none."""
    return "-" if at is None else localtime(at).strftime("%Y-%m-%d %H:%M:%S")


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
