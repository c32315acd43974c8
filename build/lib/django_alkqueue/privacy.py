"""Payload privacy: which queues carry personal data, and how their payloads are masked.

A queue is sensitive when its @consumer says `sensitive=True` or ALKQUEUE["QUEUES"][name]
does. Its payloads are shown whole only to users with the `view_payload` permission, and
never written to logs, error texts, `alk_status` or metrics (docs/security.md).
"""

from __future__ import annotations

from typing import Any

from .conf import get_settings
from .consumers import registry

#: What a masked value reads as.
MASK = "***"


def is_sensitive(queue: str) -> bool:
    spec = registry.get(queue)
    if spec is not None and spec.sensitive:
        return True
    return bool(get_settings().QUEUES.get(queue, {}).get("sensitive", False))


def masked(payload: Any) -> Any:
    """The payload's shape with every value replaced: keys of objects stay, so an operator
    can still tell one kind of job from another."""
    if isinstance(payload, dict):
        return {key: masked(value) for key, value in payload.items()}
    if isinstance(payload, list):
        return [masked(value) for value in payload]
    return MASK
