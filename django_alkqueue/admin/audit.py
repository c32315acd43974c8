"""Who runs an admin action, for its entry in the audit log (audit.py)."""

from __future__ import annotations

from django.http import HttpRequest

from .. import audit


def actor(request: HttpRequest) -> audit.Actor:
    """The user running the action: admin views are for logged-in staff only."""
    return audit.Actor(request.user.pk or 0)
