"""What a page shows of the long texts a row stores: the payload (or its masked shape, see
masking.py) and the error text, each cut to a documented size (the head and the tail kept),
so that no row can make a page as large as the row (docs/security.md)."""

from __future__ import annotations

import json
from typing import Any

from django.utils.formats import number_format
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..error_text import capped
from ..privacy import masked

#: Characters of a payload's JSON a detail page shows: its head and its tail.
PAYLOAD_SHOWN = 32 * 1024
#: Characters of an error text a detail page shows: its head and its tail.
ERROR_SHOWN = 16 * 1024
#: Characters of a short text a changelist cell shows (a worker's queues, a retry policy).
CELL_SHOWN = 300


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
