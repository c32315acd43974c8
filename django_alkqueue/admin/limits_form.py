"""The "Set limits" form of the consumer page, and the limits in force as the page shows them.

The form opens with the limits in force (when every selected consumer has the same ones);
each field the operator changes becomes an override, and a field left as shown keeps
following the code or the settings. An emptied field is the override "no limit"."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import format_lazy
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import limits as flow
from ..exceptions import InvalidOption
from ..limits import LimitsInForce
from ..models import Consumer
from ..reports.flow_status import in_force, source_label

_WHOLE = re.compile(r"[0-9]{1,12}")
_EMPTY = gettext_lazy(" Empty: no limit.")
_HELP = {
    "concurrency": gettext_lazy(
        "At most this many jobs of the queue claimed at once, across all workers."
    ),
    "key_concurrency": gettext_lazy(
        "At most this many jobs of one concurrency key claimed at once."
    ),
    "rate": gettext_lazy('At most N claims per period: "N/s", "N/m" or "N/h".'),
    "key_rate": gettext_lazy('The same, per concurrency key: "N/s", "N/m" or "N/h".'),
}


class LimitsForm(forms.Form):
    """Four text fields, one per limit; empty is "no limit". Cleaned values are parsed
    limits (int, Rate or None); `changes()` keeps those the operator changed."""

    def __init__(self, *args: Any, shown: dict[str, str | None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shown = {name: shown.get(name) or "" for name in flow.NAMES}
        for name in flow.NAMES:
            self.fields[name] = forms.CharField(
                required=False,
                max_length=40,
                initial=self.shown[name],
                help_text=format_lazy("{}{}", _HELP[name], _EMPTY),
                label=name,
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in flow.NAMES:
            text = str(cleaned.get(name) or "").strip()
            if text == self.shown[name]:
                continue  # as shown (a period like "2 per 90 s" need not parse back)
            try:
                cleaned[name] = _parse(name, text)
            except InvalidOption as refused:
                self.add_error(name, str(refused))
        return cleaned

    def changes(self) -> dict[str, int | flow.Rate | None]:
        """The limits the operator changed from what the form showed, parsed."""
        return {
            name: self.cleaned_data[name]
            for name in flow.NAMES
            if str(self.data.get(name, "")).strip() != self.shown[name]
        }


def _parse(name: str, text: str) -> int | flow.Rate | None:
    if not text:
        return None
    if name in ("concurrency", "key_concurrency"):
        if not _WHOLE.fullmatch(text):
            text = _("%(name)s must be a whole number from 1 to %(max)d")
            raise InvalidOption(text % {"name": name, "max": flow.MAX_LIMIT})
        return flow.parse(name, int(text))
    return flow.parse(name, text)


def limits_of(consumer: Consumer) -> LimitsInForce:
    return in_force(consumer.queue, consumer.code_limits, consumer.limit_overrides)


def shown_limits(consumers: Sequence[Consumer]) -> dict[str, str | None]:
    """What the form opens with: the limits in force, those every consumer shares."""
    described = [limits_of(c).limits.describe() for c in consumers]
    if not described:
        return {}
    return {name: value for name, value in described[0].items()
            if all(d[name] == value for d in described)}  # fmt: skip


def describe_changes(changes: dict[str, int | flow.Rate | None]) -> str:
    """ "concurrency=4, rate=no limit" for the admin log and the message."""
    no_limit = _("no limit")
    return ", ".join(
        f"{name}={no_limit if value is None else value}" for name, value in changes.items()
    )


def limits_table(limits: LimitsInForce) -> SafeString:
    """The limits in force, one row each, with where each comes from; then each stored limit
    that does not parse, with its stored value, marked as ignored."""
    rows = format_html_join(
        "",
        '<tr data-limit="{}"><th>{}</th><td>{}</td><td class="alk-source">{}</td></tr>',
        (
            (name, name, value or _("no limit"), source_label(limits.sources.get(name)))
            for name, value in limits.limits.describe().items()
        ),
    )
    ignored = format_html_join(
        "",
        '<tr class="alk-ignored" data-ignored="{}"><th>{}</th><td>{}</td>'
        '<td class="alk-warn">{}</td></tr>',
        ((item.name, item.name, item.stored, _ignored_note(item)) for item in limits.ignored),
    )
    return format_html('<table class="alk-limits">{}{}</table>', rows, ignored)


def _ignored_note(item: flow.Ignored) -> str:
    return _("%(source)s: not a valid limit, ignored") % {"source": source_label(item.source)}


def limits_summary(limits: LimitsInForce) -> str:
    """One line for a list column: "concurrency=8 (override), rate=100/s (code)", then any
    stored limit that does not parse: "rate=[5, 1e+400] (override: not a valid limit, ...)"."""
    shown = [
        f"{name}={value} ({source_label(limits.sources.get(name))})"
        for name, value in limits.limits.describe().items()
        if value is not None
    ]
    shown += [f"{item.name}={item.stored} ({_ignored_note(item)})" for item in limits.ignored]
    return ", ".join(shown) or "-"
