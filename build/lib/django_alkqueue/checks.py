"""System checks. Every id is stable and documented once, in docs/checks.md."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from .consumers import registry

#: How to fix each check's errors; docs/checks.md says more under the id's heading.
HINTS = {
    "alkqueue.E001": "Give each queue exactly one @consumer.",
    "alkqueue.E002": "Fix the entry's cron, queue or task.",
    "alkqueue.E003": "Fix the named key of the ALKQUEUE setting.",
    "alkqueue.E004": "Name an alias of DATABASES.",
}


def _error(message: str, check_id: str) -> checks.Error:
    anchor = check_id.replace(".", "").lower()
    hint = f"{HINTS[check_id]} See docs/checks.md#{anchor}."
    return checks.Error(message, hint=hint, id=check_id)


@checks.register("alkqueue")
def check_consumers(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E001: consumer discovery failed (two consumers for one queue, ...)."""
    return [_error(message, "alkqueue.E001") for message in registry.errors]


@checks.register("alkqueue")
def check_periodic(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E002: a PERIODIC entry with a bad cron, queue, task path or no target."""
    from .conf import get_settings
    from .periodic import entry_errors

    try:
        periodic = get_settings().PERIODIC
    except ImproperlyConfigured:  # reported by alkqueue.E003
        return []
    return [
        _error(message, "alkqueue.E002")
        for name, entry in periodic.items()
        for message in entry_errors(name, entry)
    ]


@checks.register("alkqueue")
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E003: the ALKQUEUE setting is not a dict, has an unknown key or a bad value.
    alkqueue.E004: DATABASE or LISTEN_DATABASE names an alias that DATABASES lacks."""
    from .conf import get_settings

    try:
        settings = get_settings()
    except ImproperlyConfigured as exc:
        return [_error(str(exc), "alkqueue.E003")]
    return [
        _error(f"ALKQUEUE[{key!r}] is {alias!r}, which is not in DATABASES.", "alkqueue.E004")
        for key, alias in (("DATABASE", settings.DATABASE),
                           ("LISTEN_DATABASE", settings.LISTEN_DATABASE))
        if alias is not None and alias not in connections
    ]  # fmt: skip
