"""Consumers: the handler bound to each queue, its settings, live counts, pause and resume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.utils import translation
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext, pgettext_lazy

from .. import operations
from ..audit import record
from ..clock import system_clock
from ..exceptions import AlkQueueError
from ..models import Consumer, DeadLetter, QueueMessage
from .audit import actor
from .base import QueueAdmin
from .compat import BOTH_PLACES, action
from .confirmation import confirmation, confirmed
from .limits_form import (
    LimitsForm,
    describe_changes,
    limits_of,
    limits_summary,
    limits_table,
    shown_limits,
)
from .links import queue_page_url
from .permissions import has_perm
from .stored_text import cell


def paused_state() -> SafeString:
    """The paused badge, in the page's language."""
    return format_html('<span class="alk-state alk-stale">{}</span>', pgettext("state", "paused"))


def _count_of(rows: QuerySet[Any]) -> Coalesce:
    """A correlated COUNT of `rows` (already filtered on queue = OuterRef("queue"))."""
    counted = rows.order_by().values("queue").annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


class ConsumerAdmin(QueueAdmin[Consumer]):
    list_display = (
        "queue_link",
        "handler_name",
        "lease_seconds",
        "max_attempts",
        "retry",
        "paused_badge",
        "limits",
        "pending",
        "scheduled",
        "claimed",
        "dead",
    )
    search_fields = ("queue", "handler")
    ordering = ("queue",)
    actions = ["pause", "resume", "set_limits", "reset_limits"]
    readonly_fields = ("retry", "limits_in_force")
    fields = (
        "queue",
        "handler",
        "lease_seconds",
        "max_attempts",
        "retry",
        "paused",
        "sensitive",
        "limits_in_force",
        "created_at",
        "updated_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Consumer]:
        """Live counts per consumer in the same query: one indexed subquery per figure."""
        now = system_clock()
        live = QueueMessage.objects.filter(queue=OuterRef("queue"))
        return (
            super()
            .get_queryset(request)
            .annotate(
                pending=_count_of(live.pending(now)),
                scheduled=_count_of(live.scheduled(now)),
                claimed=_count_of(live.claimed()),
                dead=_count_of(DeadLetter.objects.filter(queue=OuterRef("queue"))),
            )
        )

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, Consumer, "pause_consumer")

    def has_resume_permission(self, request: HttpRequest) -> bool:
        """resume_consumer, or pause_consumer: whoever may stop a queue may start it again,
        and an on-call role may be given resume alone."""
        return has_perm(request, Consumer, "resume_consumer") or self.has_pause_permission(request)

    def has_set_limits_permission(self, request: HttpRequest) -> bool:
        """set_limits_consumer, for Set limits and Reset limits to code alike."""
        return has_perm(request, Consumer, "set_limits_consumer")

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("queue"), ordering="queue")
    def queue_link(self, consumer: Consumer) -> SafeString | str:
        url = queue_page_url(consumer.queue)
        return (
            consumer.queue
            if url is None
            else format_html('<a href="{}">{}</a>', url, consumer.queue)
        )

    @admin.display(description=gettext_lazy("handler"), ordering="handler")
    def handler_name(self, consumer: Consumer) -> SafeString:
        name = consumer.handler.rsplit(".", 1)[-1]
        return format_html('<span title="{}">{}</span>', consumer.handler, name)

    @admin.display(description=pgettext_lazy("state", "paused"), ordering="paused")
    def paused_badge(self, consumer: Consumer) -> SafeString | str:
        return paused_state() if consumer.paused else _("no")

    @admin.display(description=gettext_lazy("lease"), ordering="lease")
    def lease_seconds(self, consumer: Consumer) -> str:
        return _("%(seconds)s s") % {"seconds": f"{consumer.lease:g}"}

    @admin.display(description=gettext_lazy("retry policy"))
    def retry(self, consumer: Consumer) -> str:
        policy = consumer.retry_policy or {}
        return cell(", ".join(f"{k}={v}" for k, v in policy.items())) or "-"

    @admin.display(description=gettext_lazy("limits (from)"))
    def limits(self, consumer: Consumer) -> str:
        return limits_summary(limits_of(consumer))

    @admin.display(description=gettext_lazy("limits in force"))
    def limits_in_force(self, consumer: Consumer) -> SafeString:
        return limits_table(limits_of(consumer))

    @admin.display(description=gettext_lazy("pending"), ordering="pending")
    def pending(self, consumer: Any) -> int:
        return int(consumer.pending)

    @admin.display(description=gettext_lazy("scheduled"), ordering="scheduled")
    def scheduled(self, consumer: Any) -> int:
        return int(consumer.scheduled)

    @admin.display(description=gettext_lazy("claimed"), ordering="claimed")
    def claimed(self, consumer: Any) -> int:
        return int(consumer.claimed)

    @admin.display(description=gettext_lazy("dead"), ordering="dead")
    def dead(self, consumer: Any) -> int:
        return int(consumer.dead)

    # -- actions ---------------------------------------------------------------------------

    @action(
        permissions=["pause"],
        description=gettext_lazy("Pause consumer"),
        description_plural=gettext_lazy("Pause selected consumers"),
        location=BOTH_PLACES,
    )
    def pause(self, request: HttpRequest, queryset: QuerySet[Consumer]) -> None:
        self._set_paused(request, queryset, True)

    @action(
        permissions=["resume"],
        description=gettext_lazy("Resume consumer"),
        description_plural=gettext_lazy("Resume selected consumers"),
        location=BOTH_PLACES,
    )
    def resume(self, request: HttpRequest, queryset: QuerySet[Consumer]) -> None:
        self._set_paused(request, queryset, False)

    def _set_paused(self, request: HttpRequest, queryset: QuerySet[Consumer], paused: bool) -> None:
        rows = list(queryset.order_by("queue").values_list("pk", "queue"))
        names = [name for _n, name in rows]
        change = operations.pause if paused else operations.resume
        changed = change(queryset.db, names)
        verb = "pause" if paused else "resume"
        record(
            actor(request),
            Consumer,
            verb,
            [pk for pk, _n in rows],
            detail=f"queues {', '.join(names)}",
        )
        if paused:
            text = ngettext("Paused %(n)d queue: %(names)s.", "Paused %(n)d queues: %(names)s.",
                            changed)  # fmt: skip
        else:
            text = ngettext("Resumed %(n)d queue: %(names)s.", "Resumed %(n)d queues: %(names)s.",
                            changed)  # fmt: skip
        text %= {"n": changed, "names": ", ".join(names)}
        if paused:
            text += _(" Workers stop claiming from them within one poll interval.")
        self.message_user(request, text, messages.SUCCESS)

    @action(
        permissions=["set_limits"],
        description=gettext_lazy("Set limits"),
        description_plural=gettext_lazy("Set limits of selected consumers"),
        location=BOTH_PLACES,
    )
    def set_limits(self, request: HttpRequest, queryset: QuerySet[Consumer]) -> HttpResponse | None:
        consumers = list(queryset.order_by("queue"))
        form = LimitsForm(
            request.POST if confirmed(request) else None, shown=shown_limits(consumers)
        )
        if not form.is_valid():
            return confirmation(
                self,
                request,
                title=_("Set limits"),
                count=len(consumers),
                question=_(
                    "Each limit you change overrides the code's and the settings' until Reset "
                    "limits to code, across worker restarts; a limit left as shown keeps "
                    "following them. Workers apply the change within one poll interval."
                ),
                button=_("Set limits"),
                form=form,
            )
        changes = form.changes()
        names = [c.queue for c in consumers]

        def change(name: str) -> None:
            if changes:  # nothing changed: logged all the same, nothing written
                operations.set_limits(name, **changes, using=queryset.db)

        refused = self._each_queue(request, names, change)
        done = [c for c in consumers if c.queue not in refused]
        if done:
            with translation.override(None):  # the admin log stays in English
                logged = describe_changes(changes) or "nothing changed"
            record(actor(request), Consumer, "set limits", [c.pk for c in done],
                   detail=f"queues {', '.join(c.queue for c in done)}: {logged}")  # fmt: skip
            described = describe_changes(changes) or _("nothing changed")
            text = ngettext("Limits of %(n)d queue: %(what)s.",
                            "Limits of %(n)d queues: %(what)s.", len(done))  # fmt: skip
            self.message_user(request, text % {"n": len(done), "what": described}, messages.SUCCESS)
        return None

    @action(
        permissions=["set_limits"],
        description=gettext_lazy("Reset limits to code"),
        description_plural=gettext_lazy("Reset limits of selected consumers to code"),
        location=BOTH_PLACES,
    )
    def reset_limits(self, request: HttpRequest, queryset: QuerySet[Consumer]) -> None:
        rows = list(queryset.order_by("queue").values_list("pk", "queue"))
        refused = self._each_queue(
            request, [name for _n, name in rows],
            lambda name: operations.reset_limits(name, using=queryset.db),
        )  # fmt: skip
        done = [(pk, name) for pk, name in rows if name not in refused]
        if not done:
            return
        names = [name for _n, name in done]
        record(actor(request), Consumer, "reset limits", [pk for pk, _n in done],
               detail=f"queues {', '.join(names)}")  # fmt: skip
        text = ngettext(
            "Reset the limits of %(n)d queue to code: %(names)s.",
            "Reset the limits of %(n)d queues to code: %(names)s.",
            len(names),
        )
        self.message_user(request, text % {"n": len(names), "names": ", ".join(names)},
                          messages.SUCCESS)  # fmt: skip

    def _each_queue(
        self, request: HttpRequest, names: list[str], change: Callable[[str], object]
    ) -> set[str]:
        """Run `change` on each queue; the queues it refused (a name written outside the
        API, which operations refuse) are named in an error message. Returns them."""
        refused: dict[str, str] = {}
        for name in names:
            try:
                change(name)
            except AlkQueueError as error:
                refused[name] = str(error)
        if refused:
            listed = "; ".join(f"{name}: {why}" for name, why in refused.items())
            text = _("Limits left unchanged for %(queues)s") % {"queues": listed}
            self.message_user(request, text, messages.ERROR)
        return set(refused)
