"""The ModelAdmin every queue page shares: read-only rows, cheap counts, no facet counts,
changelists that leave payloads and tracebacks in the database, only the lookups the page
offers (docs/security.md), and the 403 on actions the user may not run."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ERROR_FLAG, IGNORED_PARAMS, PAGE_VAR
from django.db import connections, router
from django.db.models import Field, ForeignObjectRel, IntegerField, Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.utils.html import escape
from django.utils.translation import gettext as _

from .counts import EstimatedCountPaginator
from .date_params import refuse_bad_dates
from .permissions import may_view, refuse_forbidden_action
from .selection import all_matching
from .times import SHOWN, date_time_fields, shown, swap_names

M = TypeVar("M", bound=Model)

if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin
else:

    class ModelAdmin(admin.ModelAdmin):
        """Subscriptable at run time too, as django-stubs declares it (no django_stubs_ext)."""

        def __class_getitem__(cls, item: object) -> type:
            return cls


#: Seconds between two live updates of a page (live.js), or two reloads when scripts are off.
LIVE_SECONDS = 5

#: The query parameter that turns off the reload standing in for live.js (?refresh=0).
REFRESH_VAR = "refresh"


def reload_without_scripts(request: HttpRequest) -> dict[str, Any]:
    """A live changelist's reload when scripts are off (live_noscript.html): `alk_refresh`,
    its seconds, or None once ?refresh=0 turned it off; `alk_refresh_toggle`, the URL that
    turns it off or on again with the page's other parameters kept."""
    on = request.GET.get(REFRESH_VAR) != "0"
    others = request.GET.copy()
    others.pop(REFRESH_VAR, None)
    if on:
        others[REFRESH_VAR] = "0"
    return {
        "alk_refresh": LIVE_SECONDS if on else None,
        "alk_refresh_toggle": "?" + others.urlencode() if others else request.path,
    }


#: A whole number as a person writes it in a URL: no sign other than "-", no "_", no spaces
#: (int() accepts all three, and a 64-bit overflow then reaches the database).
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,19}")


def parse_int(text: str, field: Field[Any, Any] | ForeignObjectRel | None = None) -> int | None:
    """`text` as an integer the column can hold (64 bits unless `field` says less), or None."""
    if not _WHOLE_NUMBER.fullmatch(text):
        return None
    low, high = -(2**63), 2**63 - 1
    if isinstance(field, IntegerField):
        ops = connections[router.db_for_read(field.model)].ops
        low, high = ops.integer_field_range(field.get_internal_type())
    value = int(text)
    return value if low <= value <= high else None


#: No text column holds it, and PostgreSQL refuses it in a parameter (an error, not no rows).
NUL = "\x00"


#: The query parameters Django's changelist reads as other than lookups: its sort, search,
#: page, error flag ...
_NOT_LOOKUPS = frozenset({*IGNORED_PARAMS, PAGE_VAR, ERROR_FLAG})


class ReloadToggle(admin.SimpleListFilter):
    """Takes ?refresh= (the reload's toggle when scripts are off, reload_without_scripts) off
    the changelist's lookups, as a list filter takes its own parameter, so that it filters
    nothing and the page's links keep it. It offers no choices, so it is never shown."""

    title = "refresh"
    parameter_name = REFRESH_VAR

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset


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
    #: Integer columns a URL may filter on, as `name`, `name__exact` or `name__in` (a list
    #: of ids): the links between pages use them. Every other lookup outside list_filter is
    #: refused, since each one is a query the page's indexes were not built for.
    id_lookups: tuple[str, ...] = ("id",)
    #: Text columns a URL may filter on by exact match (`name` or `name__exact`), each the
    #: trailing column of an index whose leading column the queue filter gives.
    exact_lookups: tuple[str, ...] = ()

    class Media:
        css = {"all": ("django_alkqueue/admin.css",)}

    def __init__(self, model: type[M], admin_site: admin.AdminSite) -> None:
        super().__init__(model, admin_site)
        # The detail page shows each date-time column as the list pages do (admin.times),
        # not in the locale's DATETIME_FORMAT: a stand-in display per column.
        self._date_times = {f.name: shown(f) for f in date_time_fields(model)}

    def __getattr__(self, name: str) -> Any:
        """`enqueued_at_shown`: the detail page's display of the date-time column."""
        column = name.removesuffix(SHOWN)
        if column != name and column in self.__dict__.get("_date_times", {}):
            return self._date_times[column]
        raise AttributeError(name)

    def get_fieldsets(self, request: HttpRequest, obj: M | None = None) -> Any:
        return [
            (title, {**options, "fields": swap_names(options["fields"], set(self._date_times))})
            for title, options in super().get_fieldsets(request, obj)
        ]

    def lean(self, queryset: QuerySet[M]) -> QuerySet[M]:
        return queryset.defer(*self.changelist_defer) if self.changelist_defer else queryset

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        """Only the declared filters' parameters, exact matches of the exact lookups, and
        integer values of the id lookups."""
        if lookup in self._filter_parameters(request):
            return True
        name, _, operator = lookup.partition("__")
        if name in self.exact_lookups and operator in ("", "exact"):
            return True
        if name not in self.id_lookups or operator not in ("", "exact", "in"):
            return False
        field = self.model._meta.get_field(name)
        parts = value.split(",") if operator == "in" else [value]
        return all(parse_int(part.strip(), field) is not None for part in parts)

    def _filter_parameters(self, request: HttpRequest) -> set[str]:
        """The query parameters list_filter reads: a SimpleListFilter's parameter_name, and
        the bounds a field filter (the date filter) or the date hierarchy writes for its
        field."""
        names: set[str] = set()
        for item in self.get_list_filter(request):
            if isinstance(item, type) and issubclass(item, admin.SimpleListFilter):
                names.add(str(item.parameter_name))
            else:
                path = item[0] if isinstance(item, (list, tuple)) else item
                names |= {f"{path}__{bound}" for bound in ("gte", "lt", "isnull")}
        if self.date_hierarchy:  # Django turns its year, month and day into a range
            parts = ("year", "month", "day", "gte", "lt")
            names |= {f"{self.date_hierarchy}__{part}" for part in parts}
        return names

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[M], search_term: str
    ) -> tuple[QuerySet[M], bool]:
        """The search (exact where exact_search says so), the rows a filter by a text column
        may find (text_scope), and only the columns the changelist shows (lean): the
        changelist's last word on its queryset."""
        found, duplicates = self._search(request, queryset, search_term)
        if any(name.partition("__")[0] in self.exact_lookups for name in request.GET):
            found = found.filter(self.text_scope(request))
        return self.lean(found), duplicates

    def _search(
        self, request: HttpRequest, queryset: QuerySet[M], search_term: str
    ) -> tuple[QuerySet[M], bool]:
        term = search_term.strip()
        if not self.exact_search or not term:
            return super().get_search_results(request, queryset, search_term)
        match = Q()
        for name in self.get_search_fields(request):
            if not isinstance(self.model._meta.get_field(name), IntegerField):
                match |= Q(**{name: term}) & self.text_scope(request)
            elif (number := parse_int(term, self.model._meta.get_field(name))) is not None:
                match |= Q(**{name: number})
        return (queryset.filter(match) if match else queryset.none()), False

    def text_scope(self, request: HttpRequest) -> Q:
        """The rows a search or a filter by a text column (a key) may find: all of them here;
        PayloadPrivacy leaves out the queues whose keys the user may not see."""
        return Q()

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> M | None:
        # Django passes an empty `?_to_field=` on as a field name, and fails to look it up
        # (a 500 on every detail, history and delete page); empty means the primary key.
        return super().get_object(request, object_id, from_field or None)

    def get_list_filter(self, request: HttpRequest) -> Any:
        return (*super().get_list_filter(request), ReloadToggle)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """Django's ChangeList, once the URL's lookups pass: a NUL character, a date the page
        cannot answer, or a lookup the page does not offer is Django's "invalid filter"
        redirect (?e=1, IncorrectLookupParameters), not a 400 or a 500."""
        lookups = {k: v for k, v in request.GET.lists() if k not in _NOT_LOOKUPS}
        for key, values in lookups.items():
            if any(NUL in str(value) for value in [key, *values]):
                raise IncorrectLookupParameters(f"{key[:30]!r}: a NUL character")
        refuse_bad_dates(self.model, self.date_hierarchy, lookups)
        for key, values in lookups.items():
            if not all(self.lookup_allowed(key, value, request) for value in values):
                raise IncorrectLookupParameters(f"Filtering by {key[:30]!r} not allowed")
        return super().get_changelist_instance(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False  # rows change through actions only; the detail page is read-only

    def has_view_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return may_view(request, self.model)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        refuse_forbidden_action(self, request)
        if refused := self._refuse_malformed_selection(request):
            return refused
        return super().changelist_view(request, extra_context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        refuse_forbidden_action(self, request)
        if refused := self._refuse_malformed_selection(request):
            return refused
        return super().change_view(request, object_id, form_url, extra_context)

    def _refuse_malformed_selection(self, request: HttpRequest) -> HttpResponse | None:
        """A 400 for an action posted with a ticked id the primary key cannot hold: Django
        would pass it to the database, which raises (a 500). Django ignores the ticked ids
        when the action runs on every matching row."""
        if request.method != "POST" or all_matching(request):
            return None
        pk = self.model._meta.pk
        assert pk is not None
        for value in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
            if isinstance(pk, IntegerField) and parse_int(value, pk) is None:
                # The posted value is the sender's: plain text, escaped besides, never markup.
                text = _("Not a %(field)s of this page: %(value)s")
                shown = escape(repr(value[:40]))
                return HttpResponseBadRequest(
                    text % {"field": pk.verbose_name, "value": shown},
                    content_type="text/plain; charset=utf-8",
                )
        return None
