"""The changelist filters. Each one is a condition an index answers: the queue (the leading
column of every queue index), the live state (the two partial indexes), the dead letter's
reason ((reason, died_at)); the worker table is small."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from ..clock import system_clock
from ..conf import get_settings
from ..jobs import EXPIRED, FAILED, LIVE_STATES, MAX_ATTEMPTS_EXCEEDED
from ..models import QueueMessage, QueueMessageQuerySet, WorkerQuerySet
from ..status import known_queues


class QueueFilter(admin.SimpleListFilter):
    title = "queue"
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
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(state, state) for state in LIVE_STATES]

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

    title = "reason"
    parameter_name = "reason"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(reason, reason) for reason in (MAX_ATTEMPTS_EXCEEDED, FAILED, EXPIRED)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(reason=value) if value else queryset


class WorkerStateFilter(admin.SimpleListFilter):
    title = "heartbeat"
    parameter_name = "heartbeat"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "live"), ("stale", "stale")]

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
