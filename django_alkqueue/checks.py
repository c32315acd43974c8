"""System checks. Ids are stable and documented in docs/consumers.md."""

from __future__ import annotations

from typing import Any

from django.core import checks

from .consumers import registry


@checks.register("alkqueue")
def check_periodic(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E002: a PERIODIC entry with a bad cron, queue, task path or no target."""
    from .conf import get_settings
    from .periodic import entry_errors

    return [
        checks.Error(message, hint="See docs/periodic.md.", id="alkqueue.E002")
        for name, entry in get_settings().PERIODIC.items()
        for message in entry_errors(name, entry)
    ]


@checks.register("alkqueue")
def check_consumers(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """alkqueue.E001: consumer discovery failed (two consumers for one queue, ...)."""
    return [
        checks.Error(message, hint="Give each queue exactly one @consumer.", id="alkqueue.E001")
        for message in registry.errors
    ]
