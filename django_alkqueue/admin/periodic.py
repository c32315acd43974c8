"""Periodic schedules: ALKQUEUE["PERIODIC"] as the leader runs it, read-only, with each
schedule's last and next tick, and Pause / Resume (permission pause_periodictick)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import periodic
from ..audit import record
from ..clock import system_clock
from ..conf import get_settings
from ..models import PeriodicTick
from .audit import actor
from .base import QueueAdmin
from .compat import BOTH_PLACES, action
from .consumers import paused_state
from .masking import hidden_queues
from .permissions import has_perm
from .times import when

#: The detail page's "runs" field when the schedule's queue is one the user may not see.
MASKED_TARGET = "target_masked"


class PeriodicScheduleAdmin(QueueAdmin[PeriodicTick]):
    list_display = ("name", "cron", "target", "last", "next", "state")
    search_fields = ("name",)
    exact_search = True
    ordering = ("name",)
    actions = ["pause", "resume"]
    fields = ("name", "cron", "target", "last", "next", "state")
    readonly_fields = (*fields, MASKED_TARGET)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Every configured schedule gets its row, so the list shows the ones that have not
        # ticked yet; a row is a name, a null tick and the paused flag, made once.
        periodic.ensure_rows(self._using(), [s.name for s in periodic.schedules()])
        return super().changelist_view(request, extra_context)

    def _using(self) -> str:
        return get_settings().DATABASE

    def _schedule(self, row: PeriodicTick) -> periodic.Schedule | None:
        return {s.name: s for s in periodic.schedules()}.get(row.name)

    @admin.display(description=gettext_lazy("cron"))
    def cron(self, row: PeriodicTick) -> str:
        schedule = self._schedule(row)
        return schedule.cron if schedule else "-"

    def get_list_display(self, request: HttpRequest) -> Any:
        hidden = hidden_queues(request)
        return [self._target_column(hidden) if f == "target" else f for f in self.list_display]

    def get_fields(self, request: HttpRequest, obj: PeriodicTick | None = None) -> Any:
        """A sensitive queue's schedule shows its payload masked (docs/security.md)."""
        if obj is None or not self._masked(obj, hidden_queues(request)):
            return self.fields
        return [MASKED_TARGET if f == "target" else f for f in self.fields or ()]

    def _masked(self, row: PeriodicTick, hidden: frozenset[str]) -> bool:
        schedule = self._schedule(row)
        return schedule is not None and schedule.target_queue in hidden

    def _target_column(self, hidden: frozenset[str]) -> Callable[[PeriodicTick], str]:
        @admin.display(description=gettext_lazy("runs"))
        def target(row: PeriodicTick) -> str:
            return self._target(row, mask=self._masked(row, hidden))

        return target

    @admin.display(description=gettext_lazy("runs"))
    def target(self, row: PeriodicTick) -> str:
        return self._target(row, mask=False)

    @admin.display(description=gettext_lazy("runs"))
    def target_masked(self, row: PeriodicTick) -> str:
        return self._target(row, mask=True)

    def _target(self, row: PeriodicTick, mask: bool) -> str:
        schedule = self._schedule(row)
        if schedule is None:
            return _("no longer in ALKQUEUE['PERIODIC']")
        return _("%(what)s on %(queue)s") % {
            "what": schedule.describe(mask),
            "queue": schedule.queue or _("its own queue"),
        }

    @admin.display(description=gettext_lazy("last tick"), ordering="last_tick")
    def last(self, row: PeriodicTick) -> str:
        return when(row.last_tick) if row.last_tick else _("not ticked yet")

    @admin.display(description=gettext_lazy("next tick"))
    def next(self, row: PeriodicTick) -> str:
        schedule = self._schedule(row)
        if schedule is None or row.paused:
            return "-"
        if periodic.never_fires(schedule.cron):
            return _("never (its cron has no date)")
        return when(periodic.next_tick(schedule.cron, system_clock()))

    @admin.display(description=gettext_lazy("state"), ordering="paused")
    def state(self, row: PeriodicTick) -> SafeString | str:
        return paused_state() if row.paused else _("active")

    # -- actions ---------------------------------------------------------------------------

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, PeriodicTick, "pause_periodictick")

    def has_resume_permission(self, request: HttpRequest) -> bool:
        return self.has_pause_permission(request)

    @action(
        permissions=["pause"],
        description=gettext_lazy("Pause schedule"),
        description_plural=gettext_lazy("Pause selected schedules"),
        location=BOTH_PLACES,
    )
    def pause(self, request: HttpRequest, queryset: QuerySet[PeriodicTick]) -> None:
        self._set_paused(request, queryset, True)

    @action(
        permissions=["resume"],
        description=gettext_lazy("Resume schedule"),
        description_plural=gettext_lazy("Resume selected schedules"),
        location=BOTH_PLACES,
    )
    def resume(self, request: HttpRequest, queryset: QuerySet[PeriodicTick]) -> None:
        self._set_paused(request, queryset, False)

    def _set_paused(
        self, request: HttpRequest, queryset: QuerySet[PeriodicTick], paused: bool
    ) -> None:
        rows = list(queryset.order_by("name").values_list("pk", "name"))
        names = [name for _n, name in rows]
        changed = periodic.set_paused(queryset.db, names, paused)
        verb = "pause" if paused else "resume"
        record(actor(request), PeriodicTick, verb, [pk for pk, _n in rows],
               detail=f"schedules {', '.join(names)}")  # fmt: skip
        if paused:
            text = ngettext("Paused %(n)d schedule: %(names)s.",
                            "Paused %(n)d schedules: %(names)s.", changed)  # fmt: skip
        else:
            text = ngettext("Resumed %(n)d schedule: %(names)s.",
                            "Resumed %(n)d schedules: %(names)s.", changed)  # fmt: skip
        text %= {"n": changed, "names": ", ".join(names)}
        if paused:
            text += _(" Its ticks pass without a job until it is resumed; missed ticks do not run.")
        self.message_user(request, text, messages.SUCCESS)
