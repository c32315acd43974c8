"""What a user without `view_payload` sees of a sensitive queue (privacy.py): its payloads,
recorded outputs and unique and concurrency keys masked, its busiest keys masked and not
linked, and no search or filter by a key finding its rows (which would confirm a guessed
key). A key is often made from the payload (an e-mail address, a customer id), so it is
withheld as the payload is (docs/security.md)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.contrib import admin
from django.db.models import Model, Q
from django.http import HttpRequest
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy

from ..models import Consumer
from ..privacy import masked_key, sensitive_queues
from ..reports.flow_status import FlowFigures
from .stored_text import masked_json, pretty_json
from .windows import UniqueWindowField

#: The permission (app label django_alkqueue) to see payloads and keys of sensitive queues.
VIEW_PAYLOAD = "django_alkqueue.view_payload"
#: The columns that hold a job's keys.
KEY_FIELDS = ("unique_key", "concurrency_key", "fair_key")
#: The queues each request's user may not see, read once per request and gone with it.
_hidden: weakref.WeakKeyDictionary[HttpRequest, frozenset[str]] = weakref.WeakKeyDictionary()


def hidden_queues(request: HttpRequest) -> frozenset[str]:
    """The queues whose payloads and keys this user may not see: none for a holder of
    `view_payload` (every superuser), else every sensitive queue (one query, once per
    request)."""
    if request.user.has_perm(VIEW_PAYLOAD):
        return frozenset()
    hidden = _hidden.get(request)
    if hidden is None:
        hidden = _hidden[request] = sensitive_queues(Consumer.objects.db)
    return hidden


def may_view_payload(request: HttpRequest, queue: str) -> bool:
    return queue not in hidden_queues(request)


def flows_as_seen(request: HttpRequest, flows: Sequence[FlowFigures]) -> list[FlowFigures]:
    """The flow figures with the busiest keys of the queues the user may not see masked."""
    if not flows:
        return []
    hidden = hidden_queues(request)
    return [flow.with_keys_masked() if flow.queue in hidden else flow for flow in flows]


def key_column(name: str, description: Any, hidden: frozenset[str]) -> Callable[[Any], str]:
    """A changelist column showing the key column `name` of each row, masked on the rows of
    the `hidden` queues."""

    @admin.display(description=description)
    def column(row: Any) -> str:
        key = getattr(row, name)
        shown = masked_key(key) if row.queue in hidden else key
        return "-" if shown is None else shown

    column.__name__ = name  # the column's CSS class stays field-<name>, as when not masked
    return column


class PayloadPrivacy(UniqueWindowField):
    """On the detail page of a row of a queue the user may not see, each field of
    `masked_fields` is swapped for its masked display (a readonly field's display function is
    not given the request, so the field is swapped, not the value). In the changelist, a key
    column is masked row by row, and a search or filter by a key leaves those queues out."""

    #: A field shown whole, and the readonly field shown in its place when masked.
    masked_fields: Mapping[str, str] = {
        "payload_json": "payload_masked",
        "unique_key": "unique_key_masked",
        "concurrency_key": "concurrency_key_masked",
        "fair_key": "fair_key_masked",
        "debounce_key": "debounce_key_masked",
    }

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or may_view_payload(request, getattr(obj, "queue", "")):
            return fieldsets
        return [
            (name, {**options, "fields": self._swap(options["fields"])})
            for name, options in fieldsets
        ]

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        hidden = hidden_queues(request)
        if not hidden:
            return shown
        return [
            key_column(f, self.model._meta.get_field(f).verbose_name, hidden)
            if f in KEY_FIELDS else f
            for f in shown
        ]  # fmt: skip

    def text_scope(self, request: HttpRequest) -> Q:
        """A search or filter by a key finds no row of a queue the user may not see."""
        hidden = hidden_queues(request)
        return ~Q(queue__in=hidden) if hidden else Q()

    def _swap(self, fields: Sequence[Any]) -> list[Any]:
        def one(field: Any) -> Any:
            if isinstance(field, (list, tuple)):
                return type(field)(one(f) for f in field)
            return self.masked_fields.get(field, field)

        return [one(field) for field in fields]

    @admin.display(description=gettext_lazy("payload"))
    def payload_json(self, row: Any) -> SafeString:
        return pretty_json(row.payload)

    @admin.display(description=gettext_lazy("payload"))
    def payload_masked(self, row: Any) -> SafeString:
        return masked_json(row.payload)

    @admin.display(description=gettext_lazy("unique key"))
    def unique_key_masked(self, row: Any) -> str:
        return masked_key(row.unique_key) or "-"

    @admin.display(description=gettext_lazy("concurrency key"))
    def concurrency_key_masked(self, row: Any) -> str:
        return masked_key(row.concurrency_key) or "-"

    @admin.display(description=gettext_lazy("fair key"))
    def fair_key_masked(self, row: Any) -> str:
        return masked_key(row.fair_key) or "-"

    @admin.display(description=gettext_lazy("debounce key"))
    def debounce_key_masked(self, row: Any) -> str:
        return masked_key(row.debounce_key) or "-"
