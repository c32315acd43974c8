"""The dead letters grouped by their error's fingerprint (error_groups.py), largest first: the
admin's *Most frequent errors*."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from django.db.models import Count, Max, Min
from django.utils.http import urlencode

from .. import error_groups
from ..models import DeadLetter


@dataclasses.dataclass(frozen=True)
class ErrorGroup:
    """Dead letters with one error fingerprint (error_groups.py)."""

    fingerprint: str
    #: "ExceptionClass: message" with the message's variable parts as placeholders.
    title: str
    #: The application frame that raised ("shop/emails.py in send"), "" when unknown.
    frame: str
    #: The reason of the group's latest dead letter.
    reason: str
    count: int
    first_seen: datetime
    last_seen: datetime
    #: The queues holding the group's dead letters, most dead letters first.
    queues: list[str]
    #: The queue the group was counted in; None: every queue.
    scope: str | None = None

    @property
    def group_query(self) -> str:
        """The dead letter changelist's query that selects exactly the group's letters."""
        scope = {} if self.scope is None else {"queue": self.scope}
        return urlencode({**scope, "error": self.fingerprint})


def frequent_errors(using: str, queue: str | None = None, limit: int = 10) -> list[ErrorGroup]:
    """The `limit` largest error groups among the dead letters of `queue` (or of every
    queue), largest first. One GROUP BY over alkqueue_dead_error_idx (queue,
    error_fingerprint, died_at), whose rows are (queue, group) pairs, then one index probe
    per group shown for its latest dead letter, whose error text names the group."""
    dead = DeadLetter.objects.using(using).filter(error_fingerprint__isnull=False)
    if queue is not None:
        dead = dead.filter(queue=queue)
    pairs = (
        dead.values_list("error_fingerprint", "queue")
        .annotate(n=Count("*"), first=Min("died_at"), last=Max("died_at"))
        .order_by()
    )
    merged: dict[str, list[tuple[int, str, datetime, datetime]]] = {}
    for print_, name, n, first, last in pairs:
        merged.setdefault(print_, []).append((n, name, first, last))
    largest = sorted(merged.items(), key=lambda item: -sum(n for n, *_ in item[1]))[:limit]
    return [_error_group(using, print_, parts, queue) for print_, parts in largest]


def _error_group(
    using: str, print_: str, parts: list[tuple[int, str, datetime, datetime]], scope: str | None
) -> ErrorGroup:
    latest_queue = max(parts, key=lambda part: part[3])[1]
    text, reason = (
        DeadLetter.objects.using(using)
        .filter(queue=latest_queue, error_fingerprint=print_)
        .order_by("-died_at")
        .values_list("last_error", "reason")
        .first()
    ) or ("", "")
    found = error_groups.signature(text or reason)
    return ErrorGroup(
        fingerprint=print_,
        title=found.title,
        frame=found.frame,
        reason=reason,
        count=sum(n for n, *_ in parts),
        first_seen=min(first for _, _, first, _ in parts),
        last_seen=max(last for *_, last in parts),
        queues=[name for _, name, *_ in sorted(parts, key=lambda part: (-part[0], part[1]))],
        scope=scope,
    )
