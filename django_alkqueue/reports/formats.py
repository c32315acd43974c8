"""How the reports and the admin's pages write a count and an age, in the active language."""

from __future__ import annotations

from django.utils.formats import number_format
from django.utils.translation import gettext as _


def grouped(n: int) -> str:
    """A whole number with the active language's thousands separator: 12,345 or 12.345."""
    return number_format(n, force_grouping=True)


def format_age(seconds: float) -> str:
    """12 s, 3 min 20 s, 2 h 5 min, 3 d 4 h."""
    s = int(seconds)
    if s < 60:
        return _("%(s)d s") % {"s": s}
    if s < 3600:
        if s % 60:
            return _("%(min)d min %(s)d s") % {"min": s // 60, "s": s % 60}
        return _("%(min)d min") % {"min": s // 60}
    if s < 86400:
        return _("%(h)d h %(min)d min") % {"h": s // 3600, "min": s % 3600 // 60}
    return _("%(d)d d %(h)d h") % {"d": s // 86400, "h": s % 86400 // 3600}
