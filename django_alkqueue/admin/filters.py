"""The changelist filters. Each one is a condition an index answers: the queue (the leading
column of every queue index), the live state (the two partial indexes), the dead letter's
reason ((reason, died_at)) and error group ((error_fingerprint, died_at)), the batch (its
members by alkqueue_batch_member_idx, then each by its id); the worker table is small."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy, pgettext_lazy

from .. import error_groups
from ..clock import system_clock
from ..conf import get_settings
from ..jobs import EXPIRED, FAILED, LIVE_STATES, MAX_ATTEMPTS_EXCEEDED
from ..models import (
    Batch,
    BatchMember,
    DeadLetter,
    QueueMessage,
    QueueMessageQuerySet,
    WorkerQuerySet,
)
from ..reports.status import known_queues
from .base import parse_int

#: The live states as pages show them; the URL keeps the English word (?state=pending).
STATE_LABELS = {
    "waiting": pgettext_lazy("state", "waiting"),
    "pending": pgettext_lazy("state", "pending"),
    "scheduled": pgettext_lazy("state", "scheduled"),
    "claimed": pgettext_lazy("state", "claimed"),
}
#: Every state a job of a workflow can be in, live or not (workflows/standing.py).
ALL_STATE_LABELS = {
    **STATE_LABELS,
    "dead": pgettext_lazy("state", "dead"),
    "succeeded": pgettext_lazy("state", "succeeded"),
    "cancelled": pgettext_lazy("state", "cancelled"),
    "gone": pgettext_lazy("state", "gone"),
}


class QueueFilter(admin.SimpleListFilter):
    title = gettext_lazy("queue")
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in known_queues(model_admin.model.objects.db)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        if queryset.model is QueueMessage:
            # No index covers all live rows by queue: each half has its partial index
            # (alkqueue_pending_idx unclaimed, alkqueue_lease_idx claimed). Naming both halves
            # lets PostgreSQL combine them (BitmapOr) instead of scanning the table.
            unclaimed = Q(queue=value, claim_token__isnull=True)
            return queryset.filter(unclaimed | Q(queue=value, claim_token__isnull=False))
        return queryset.filter(queue=value)


class StateFilter(admin.SimpleListFilter):
    title = gettext_lazy("state")
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [(state, STATE_LABELS.get(state, state)) for state in LIVE_STATES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        if value not in LIVE_STATES:
            return queryset.none()  # an unknown state matches nothing, never everything
        assert isinstance(queryset, QueueMessageQuerySet)
        return queryset.in_state(value, system_clock())


class ReasonFilter(admin.SimpleListFilter):
    """The pinned reasons; no query builds the choices."""

    title = gettext_lazy("reason")
    parameter_name = "reason"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # The stored words, as the reason column shows them (docs/admin.md, "Languages").
        return [(reason, reason) for reason in (MAX_ATTEMPTS_EXCEEDED, FAILED, EXPIRED)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(reason=value) if value else queryset


class ErrorGroupFilter(admin.SimpleListFilter):
    """The dead letters of one error group (error_groups.py), as linked from the queue page
    and the error groups page. Listed only while chosen: listing every group would cost a
    GROUP BY on each changelist load."""

    title = gettext_lazy("error group")
    parameter_name = "error"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        if not value:
            return []
        return [(value, group_title(model_admin.model.objects.db, value))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(error_fingerprint=value) if value else queryset


class BatchFilter(admin.SimpleListFilter):
    """The members of one batch (?batch=<id>), as linked from its page. Listed only while
    chosen: the batches are many, and each is named by its own row."""

    title = gettext_lazy("batch")
    parameter_name = "batch"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value, batch_id = self.value(), self._batch_id()
        if value is None:
            return []
        # Listed even when no batch has it: Django applies only a filter that lists a choice.
        found = None
        if batch_id is not None:
            found = Batch.objects.using(model_admin.model.objects.db).filter(id=batch_id).first()
        return [(value, str(found) if found else f"#{value}")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() is None:
            return queryset
        batch_id = self._batch_id()
        if batch_id is None:
            return queryset.none()  # not an id: matches nothing, never everything
        members = BatchMember.objects.using(queryset.db).filter(batch_id=batch_id)
        column = "id" if queryset.model is QueueMessage else "job_id"
        return queryset.filter(**{f"{column}__in": members.values("job_id")})

    def _batch_id(self) -> int | None:
        value = self.value()
        return None if value is None else parse_int(value, Batch._meta.pk)


def group_title(using: str, fingerprint: str) -> str:
    """The title of an error group, read from its latest dead letter (index
    alkqueue_dead_fingerprint_idx); the fingerprint itself when none is left."""
    latest = (
        DeadLetter.objects.using(using)
        .filter(error_fingerprint=fingerprint)
        .order_by("-died_at")
        .values_list("last_error", "reason")
        .first()
    )
    if latest is None:
        return fingerprint
    return error_groups.signature(latest[0] or latest[1]).title or fingerprint


class WorkerStateFilter(admin.SimpleListFilter):
    title = gettext_lazy("heartbeat")
    parameter_name = "heartbeat"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [
            ("live", pgettext_lazy("worker", "live")),
            ("stale", pgettext_lazy("worker", "stale")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        assert isinstance(queryset, WorkerQuerySet)
        after = get_settings().WORKER_STALE_AFTER
        if self.value() is None:
            return queryset
        if self.value() == "live":
            return queryset.live(system_clock(), after)
        if self.value() == "stale":
            return queryset.stale(system_clock(), after)
        return queryset.none()
