"""The app's times in templates, as on its list and detail pages (admin.times):
`{{ at|alk_when }}` for a list's age, `{{ at|alk_time }}` for a detail's time."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.safestring import SafeString

from ..admin import times

register = template.Library()


@register.filter
def alk_when(at: datetime | None) -> SafeString | str:
    return times.when(at)


@register.filter
def alk_time(at: datetime | None) -> SafeString | str:
    return times.detail(at)
