"""What a page shows of the long texts a row stores: the payload, masked for sensitive queues
unless the user holds `view_payload`, and the error text, each cut to a documented size (the
head and the tail kept), so that no row can make a page as large as the row (docs/security.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.utils.formats import number_format
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..error_text import capped
from ..privacy import is_sensitive, masked

#: Characters of a payload's JSON a detail page shows: its head and its tail.
PAYLOAD_SHOWN = 32 * 1024
#: Characters of an error text a detail page shows: its head and its tail.
ERROR_SHOWN = 16 * 1024
#: Characters of a short text a changelist cell shows (a worker's queues, a retry policy).
CELL_SHOWN = 300
#: The permission (app label django_alkqueue) to see payloads of sensitive queues whole.
VIEW_PAYLOAD = "django_alkqueue.view_payload"
#: The readonly field that shows a payload, and the one shown instead when it is masked.
PAYLOAD_FIELD = "payload_json"
MASKED_FIELD = "payload_masked"


def may_view_payload(request: HttpRequest, queue: str) -> bool:
    return not is_sensitive(queue) or request.user.has_perm(VIEW_PAYLOAD)


def pretty_json(value: Any) -> SafeString:
    text = capped(json.dumps(value, indent=2, ensure_ascii=False), PAYLOAD_SHOWN)
    return format_html('<pre class="alk-pre">{}</pre>', text)


def masked_json(value: Any) -> SafeString:
    note = _(
        'This queue is sensitive: values are masked. Seeing them takes the "%(permission)s" '
        "permission."
    ) % {"permission": "Can view payloads of sensitive queues"}  # as stored: never translated
    return format_html('{}<p class="alk-note">{}</p>', pretty_json(masked(value)), note)


def preformatted(text: str | None) -> SafeString | str:
    return format_html('<pre class="alk-pre">{}</pre>', capped(text, ERROR_SHOWN)) if text else "-"


def cell(text: str, limit: int = CELL_SHOWN) -> str:
    """`text`, or its first `limit` characters and how many more there are."""
    if len(text) <= limit:
        return text
    more = len(text) - limit
    return _("%(text)s... (%(more)s more characters)") % {
        "text": text[:limit],
        "more": number_format(more, force_grouping=True),
    }


class PayloadPrivacy(admin.ModelAdmin):  # type: ignore[type-arg]
    """Detail pages show MASKED_FIELD in place of PAYLOAD_FIELD when the row's queue is
    sensitive and the user may not see its payloads. The field is swapped, not the value,
    since a readonly field's display function is not given the request."""

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or may_view_payload(request, getattr(obj, "queue", "")):
            return fieldsets
        return [
            (name, {**options, "fields": _swap(options["fields"])}) for name, options in fieldsets
        ]

    @admin.display(description=gettext_lazy("payload"))
    def payload_json(self, row: Any) -> SafeString:
        return pretty_json(row.payload)

    @admin.display(description=gettext_lazy("payload"))
    def payload_masked(self, row: Any) -> SafeString:
        return masked_json(row.payload)


def _swap(fields: Sequence[Any]) -> list[Any]:
    def one(field: Any) -> Any:
        if isinstance(field, (list, tuple)):
            return type(field)(one(f) for f in field)
        return MASKED_FIELD if field == PAYLOAD_FIELD else field

    return [one(field) for field in fields]
