"""Times as every page of the app shows them: one format (2030-01-01 12:00:05) in the site's
time zone; where a list shows a time, its age ("3 min ago", "in 5 min") in a <time> element
whose title holds the time itself; on a detail page the time, then its age."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import DateTimeField, Model
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timezone import localtime
from django.utils.translation import gettext as _

from ..clock import system_clock
from ..reports.formats import format_age

#: The one format of a time (strftime), in the current time zone.
FORMAT = "%Y-%m-%d %H:%M:%S"


def timestamp(at: datetime | None) -> str:
    """2030-01-01 12:00:05 in the current time zone; "-" for none."""
    return "-" if at is None else localtime(at).strftime(FORMAT)


def age(at: datetime, now: datetime) -> str:
    """3 min ago, or in 5 min for a time ahead."""
    seconds = (now - at).total_seconds()
    if seconds >= 0:
        return _("%(age)s ago") % {"age": format_age(seconds)}
    return _("in %(age)s") % {"age": format_age(-seconds)}


def when(at: datetime | None, now: datetime | None = None) -> SafeString | str:
    """A list's time: its age, with the time itself (and its zone) as the title."""
    if at is None:
        return "-"
    local = localtime(at)
    title = f"{local.strftime(FORMAT)} {local.tzname()}"
    text = age(at, now or system_clock())
    return format_html('<time datetime="{}" title="{}">{}</time>', at.isoformat(), title, text)


def waiting_words(signal: str | None) -> str:
    """When a waiting job (no run_at) runs: once its dependencies are done, or once the
    `signal` it waits for comes."""
    if signal is None:
        return _("when its dependencies are done")
    return _("when the signal %(name)s comes") % {"name": repr(signal)}


def detail(at: datetime | None, now: datetime | None = None) -> SafeString | str:
    """A detail page's time: the time, then its age."""
    if at is None:
        return "-"
    local = localtime(at)
    return format_html(
        '<time datetime="{}" title="{}">{}</time> ({})',
        at.isoformat(),
        local.tzname() or "",
        local.strftime(FORMAT),
        age(at, now or system_clock()),
    )


#: The suffix of the detail page's stand-in for a date-time column: `enqueued_at_shown`.
SHOWN = "_shown"


def shown(field: DateTimeField[Any, Any]) -> Callable[[Model], SafeString | str]:
    """The detail page's display of `field`, labelled as the field."""

    @admin.display(description=field.verbose_name)
    def show(row: Model) -> SafeString | str:
        return detail(getattr(row, field.name))

    return show


def date_time_fields(model: type[Model]) -> list[DateTimeField[Any, Any]]:
    return [f for f in model._meta.get_fields() if isinstance(f, DateTimeField)]


def swap_names(fields: Any, names: set[str]) -> Any:
    """A fieldset's `fields` (names, and tuples of names on one line) with each date-time
    column's name replaced by its stand-in."""
    if isinstance(fields, (list, tuple)):
        return type(fields)(swap_names(f, names) for f in fields)
    return f"{fields}{SHOWN}" if fields in names else fields
