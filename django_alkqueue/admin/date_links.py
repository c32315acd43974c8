"""A date hierarchy that stays cheap on hundreds of millions of rows.

Django's reads the distinct days (or months, or years) of the selected range from the rows,
a scan of the whole range. This one offers every day of the month, every month of the year,
and, at the top, the years between the first and the last row (MIN and MAX: one query, two
index reads). A link to a day without rows shows an empty list. The filter a link sets is
Django's own: a range of the field, answered by its index (and, on PostgreSQL, by pruning
the partitions of other days).
"""

from __future__ import annotations

import calendar
from datetime import date
from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.db.models import Max, Min
from django.utils import formats
from django.utils.text import capfirst
from django.utils.timezone import localtime
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
            years = [{"link": link({f"{field}__year": y}), "title": str(y)}
                     for y in range(first, last + 1)]  # fmt: skip
            return {"show": True, "back": None, "choices": years, "field_name": name}
        year = str(first)
    y = int(str(year))
    if not month:
        months = [
            {"link": link({f"{field}__year": y, f"{field}__month": m}),
             "title": capfirst(formats.date_format(date(y, m, 1), "YEAR_MONTH_FORMAT"))}
            for m in range(1, 13)
        ]  # fmt: skip
        back = {"link": link({}), "title": gettext("All dates")}
        return {"show": True, "back": back, "choices": months, "field_name": name}
    m = int(str(month))
    back_to_year = {"link": link({f"{field}__year": y}), "title": str(y)}
    if not day:
        days = [
            {"link": link({f"{field}__year": y, f"{field}__month": m, f"{field}__day": d}),
             "title": capfirst(formats.date_format(date(y, m, d), "MONTH_DAY_FORMAT"))}
            for d in range(1, calendar.monthrange(y, m)[1] + 1)
        ]  # fmt: skip
        return {"show": True, "back": back_to_year, "choices": days, "field_name": name}
    chosen = date(y, m, int(str(day)))
    back = {"link": link({f"{field}__year": y, f"{field}__month": m}),
            "title": capfirst(formats.date_format(chosen, "YEAR_MONTH_FORMAT"))}  # fmt: skip
    only = [{"title": capfirst(formats.date_format(chosen, "MONTH_DAY_FORMAT"))}]
    return {"show": True, "back": back, "choices": only, "field_name": name}
