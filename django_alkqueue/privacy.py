"""Payload privacy: which queues carry personal data, and how their payloads are masked.

A queue is sensitive when its @consumer says `sensitive=True` or ALKQUEUE["QUEUES"][name]
does. A worker writes what it saw into the queue's Consumer row, so a process that has not
imported the consumer's module (the admin's) knows it too; where this process's code declares
the consumer, the code wins. A sensitive queue's payloads, and its unique and concurrency keys
(a key is often made from the payload), are shown whole only to users with the `view_payload`
permission, masked by `alk_status` and `alk_periodic` unless asked, and never written to
logs, error texts or metrics (docs/security.md).
"""

from __future__ import annotations

from typing import Any

from .conf import get_settings
from .consumers import ConsumerSpec, registry
from .models import Consumer

#: What a masked value reads as.
MASK = "***"


def is_sensitive(queue: str, stored: bool = False) -> bool:
    """Whether `queue` is sensitive: its consumer's `sensitive` where this process declares
    the consumer, else `stored` (its Consumer row's flag); or its ALKQUEUE["QUEUES"] entry."""
    spec = registry.get(queue)
    return spec_is_sensitive(spec) if spec is not None else stored or _in_settings(queue)


def spec_is_sensitive(spec: ConsumerSpec) -> bool:
    """Whether the queue of this consumer is sensitive, by its code or by the settings: what
    a worker stores in the queue's Consumer row."""
    return spec.sensitive or _in_settings(spec.queue)


def _in_settings(queue: str) -> bool:
    return bool(get_settings().QUEUES.get(queue, {}).get("sensitive", False))


def sensitive_queues(using: str) -> frozenset[str]:
    """Every queue sensitive to this process: declared so here, set so in the settings, or
    stored so in a Consumer row by a worker (one query of the consumers' table)."""
    stored = set(
        Consumer.objects.using(using).filter(sensitive=True).values_list("queue", flat=True)
    )
    named = stored | {spec.queue for spec in registry.all()} | set(get_settings().QUEUES)
    return frozenset(name for name in named if is_sensitive(name, name in stored))


def masked(payload: Any) -> Any:
    """The payload's shape with every value replaced: keys of objects stay, so an operator
    can still tell one kind of job from another."""
    if isinstance(payload, dict):
        return {key: masked(value) for key, value in payload.items()}
    if isinstance(payload, list):
        return [masked(value) for value in payload]
    return MASK


def masked_key(key: str | None) -> str | None:
    """A unique or concurrency key as a user who may not see the queue's payloads sees it."""
    return None if key is None else MASK
