"""Date filter parameters a list page can answer: the date hierarchy's year, month and day,
and the bounds of a date filter (`__gte`, `__lt`), each refused with the admin's "invalid
filter" redirect (?e=1) when Django or the database could not turn it into a query.

Django takes any spelling int() reads ("+2031", "2_031", other scripts' digits) and fails
with a 500 on a year whose range ends past datetime's last year (9999), on a number past a
C long, and on a bound that datetime's range cannot hold once moved to UTC (SQLite and
MariaDB get UTC datetimes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db.models import DateField, Model

#: What each part of a hierarchy link may hold. The years stop short of datetime's first and
#: last: Django turns a year, month or day into a range that ends on the next one, and the
#: range's ends move across a day in the project's time zone.
PART_RANGES = {"year": range(2, 9999), "month": range(1, 13), "day": range(1, 32)}
#: The dates a bound may name, for the same reason.
FIRST_DAY, LAST_DAY = date(1, 1, 2), date(9999, 12, 30)
_DIGITS = re.compile(r"[0-9]{1,4}")
_BOUNDS = ("gte", "lt", "gt", "lte")


def refuse_bad_dates(model: type[Model], hierarchy: str | None, params: Mapping[str, Any]) -> None:
    """IncorrectLookupParameters for a hierarchy part or a date bound in `params` (the
    changelist's lookups, each a list of values) that the page cannot answer."""
    if hierarchy:
        _refuse_bad_parts(hierarchy, params)
    for key, values in params.items():
        name, _, lookup = key.partition("__")
        if lookup not in _BOUNDS:
            continue
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            continue
        if isinstance(field, DateField):  # DateTimeField is one too
            for value in values if isinstance(values, list) else [values]:
                _refuse_edge_bound(field, key, value)


def _refuse_bad_parts(field: str, params: Mapping[str, Any]) -> None:
    for part, allowed in PART_RANGES.items():
        given = params.get(f"{field}__{part}")
        for value in given if isinstance(given, list) else [given]:
            if value is None:
                continue
            text = str(value)
            if not _DIGITS.fullmatch(text) or int(text) not in allowed:
                raise IncorrectLookupParameters(f"{field}__{part}={text[:20]!r}: not a {part}")


def _refuse_edge_bound(field: DateField[Any, Any], key: str, value: object) -> None:
    try:
        parsed = field.to_python(value)
    except ValidationError:
        return  # Django refuses it itself, with the same redirect
    day = parsed.date() if isinstance(parsed, datetime) else parsed
    if isinstance(day, date) and not FIRST_DAY <= day <= LAST_DAY:
        raise IncorrectLookupParameters(f"{key}={str(value)[:30]!r}: out of range")
