"""A date hierarchy that stays cheap on hundreds of millions of rows.

Django's reads the distinct days (or months, or years) of the selected range from the rows,
a scan of the whole range. This one reads the first and the last row (MIN and MAX: one
query, two index reads), then asks the index once per year, month or day it could offer
whether that span holds a row (an EXISTS each, all in one query: at most 31 index probes),
and offers only those that do. The filter a link sets is Django's own: a range of the
field, answered by its index (and, on PostgreSQL, by pruning the partitions of other days).
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.db.models import Exists, Max, Min
from django.utils import formats
from django.utils.text import capfirst
from django.utils.timezone import localtime, make_aware
from django.utils.translation import gettext


def date_links(cl: ChangeList) -> dict[str, Any] | None:
    """The context of Django's admin/date_hierarchy.html for `cl`; None when it has no rows."""
    field = str(cl.date_hierarchy)
    year, month, day = (cl.params.get(f"{field}__{part}") for part in ("year", "month", "day"))

    def link(filters: dict[str, Any]) -> str:
        return str(cl.get_query_string(filters, [f"{field}__"]))

    name = getattr(cl.model._meta.get_field(field), "verbose_name", field)
    if not year:
        bounds = cl.queryset.aggregate(first=Min(field), last=Max(field))
        if bounds["first"] is None:
            return None
        first, last = localtime(bounds["first"]).year, localtime(bounds["last"]).year
        if first != last:
            found = with_rows(cl, field, [(date(y, 1, 1), date(y + 1, 1, 1))
                                          for y in range(first, last + 1)])  # fmt: skip
            years = [{"link": link({f"{field}__year": start.year}), "title": str(start.year)}
                     for start in found]  # fmt: skip
            return {"show": True, "back": None, "choices": years, "field_name": name}
        year = str(first)
    y = int(str(year))
    if not month:
        found = with_rows(cl, field, [(date(y, m, 1), _next_month(date(y, m, 1)))
                                      for m in range(1, 13)])  # fmt: skip
        months = [
            {"link": link({f"{field}__year": y, f"{field}__month": start.month}),
             "title": capfirst(formats.date_format(start, "YEAR_MONTH_FORMAT"))}
            for start in found
        ]  # fmt: skip
        back = {"link": link({}), "title": gettext("All dates")}
        return {"show": True, "back": back, "choices": months, "field_name": name}
    m = int(str(month))
    back_to_year = {"link": link({f"{field}__year": y}), "title": str(y)}
    if not day:
        in_month = [date(y, m, d) for d in range(1, calendar.monthrange(y, m)[1] + 1)]
        found = with_rows(cl, field, [(d, d + timedelta(days=1)) for d in in_month])
        days = [
            {"link": link({f"{field}__year": y, f"{field}__month": m,
                           f"{field}__day": start.day}),
             "title": capfirst(formats.date_format(start, "MONTH_DAY_FORMAT"))}
            for start in found
        ]  # fmt: skip
        return {"show": True, "back": back_to_year, "choices": days, "field_name": name}
    chosen = date(y, m, int(str(day)))
    back = {"link": link({f"{field}__year": y, f"{field}__month": m}),
            "title": capfirst(formats.date_format(chosen, "YEAR_MONTH_FORMAT"))}  # fmt: skip
    only = [{"title": capfirst(formats.date_format(chosen, "MONTH_DAY_FORMAT"))}]
    return {"show": True, "back": back, "choices": only, "field_name": name}


def with_rows(cl: ChangeList, field: str, spans: list[tuple[date, date]]) -> list[date]:
    """The first day of each span [start, end) (days of the current time zone) holding a
    row of the list's selection, in one query: the selection's first row of the spans (an
    index read), with one EXISTS per span (an index probe each)."""
    rows = cl.queryset.order_by()
    ranges = [(_midnight(start), _midnight(end)) for start, end in spans]
    probes = {
        f"alk_span_{i}": Exists(rows.filter(**{f"{field}__gte": low, f"{field}__lt": high}))
        for i, (low, high) in enumerate(ranges)
    }
    first = (
        rows.filter(**{f"{field}__gte": ranges[0][0], f"{field}__lt": ranges[-1][1]})
        .order_by(field)
        .annotate(**probes)
        .values_list(*probes)[:1]
    )
    found = next(iter(first), ())
    return [start for (start, _end), has in zip(spans, found, strict=False) if has]


def _midnight(day: date) -> datetime:
    """The start of `day` in the current time zone."""
    return make_aware(datetime.combine(day, time.min))


def _next_month(day: date) -> date:
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)
