"""Dead letters: the changelist with its error headline, the detail page with payload and the
full error, and the actions requeue and delete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION
from django.db.models import QuerySet
from django.db.models.functions import Substr
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import operations
from ..audit import record
from ..clock import system_clock
from ..models import DeadLetter, QueueMessage
from .audit import actor
from .base import QueueAdmin
from .compat import BOTH_PLACES, action
from .confirmation import confirmation, confirmed
from .filters import BatchFilter, ErrorGroupFilter, QueueFilter, ReasonFilter, group_title
from .links import changelist_url
from .masking import PayloadPrivacy
from .permissions import has_perm
from .requeue_log import RequeueRun, record_requeue
from .selection import (
    all_matching,
    batch,
    from_detail_page,
    more_note,
    selected_ids,
    selection_count,
)
from .step_requeue import URL_NAME, requeue_from_step_view, step_requeue_url
from .steps_panel import StepsPanel
from .stored_text import preformatted
from .times import when
from .workflow_panel import WorkflowPanel

#: Live job ids linked from a requeue message.
LINKED_IDS = 100


def asked_ids(request: HttpRequest, rows: list[tuple[int, int]], more: bool) -> list[int]:
    """The dead letter ids a run was asked for: the ticked ones, those deleted or requeued
    since the page was drawn included; for all matching rows (or past the cap), those found."""
    if all_matching(request) or more:
        return [dead_id for dead_id, _ in rows]
    return sorted({int(i) for i in selected_ids(request)})


class DeadLetterAdmin(StepsPanel, WorkflowPanel, PayloadPrivacy, QueueAdmin[DeadLetter]):
    job_id_field = "job_id"
    list_display = ("id", "job_id", "queue", "died", "reason", "error", "attempts_of")
    list_filter = (
        QueueFilter,
        ReasonFilter,
        ("died_at", admin.DateFieldListFilter),
        ErrorGroupFilter,
        BatchFilter,
    )
    search_fields = ("job_id", "id")
    exact_search = True
    id_lookups = ("id", "job_id")
    search_help_text = gettext_lazy("A job id or a dead letter id (exact).")
    ordering = ("-died_at",)
    sortable_by = ("died_at",)
    changelist_defer = ("payload", "last_error")
    #: delete_selected is this class's own, not Django's: Django's lists every row it
    #: deletes (unbounded on a million dead letters) and logs one entry per row; ours counts
    #: them, asks, and logs one entry with the ids.
    actions = ["requeue", "delete_selected"]
    readonly_fields = ("payload_json", "payload_masked", "last_error_text", "unique_window")
    fieldsets = (
        (None, {"fields": [("job_id", "queue", "reason"), ("died_at", "attempts", "max_attempts"),
                           ("priority", "unique_key"), "unique_window",
                           ("concurrency_key", "fair_key")]}),
        (gettext_lazy("Error"), {"fields": ["last_error_text"]}),
        (gettext_lazy("Payload"), {"fields": ["payload_json"]}),
        (gettext_lazy("Timing"), {"fields": [("enqueued_at", "requeued_at"),
                                             ("run_at", "expires_at"),
                                             ("claimed_by", "claimed_at")]}),
        (gettext_lazy("Options"), {"fields": [("backoff_base", "lease", "retention")],
                                   "classes": ["collapse"]}),
    )  # fmt: skip

    def lean(self, queryset: QuerySet[DeadLetter]) -> QuerySet[DeadLetter]:
        return super().lean(queryset).annotate(error_head=Substr("last_error", 1, 300))

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, DeadLetter, "requeue_deadletter")

    def get_urls(self) -> list[URLPattern]:
        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            return requeue_from_step_view(self, request, object_id)

        own = path("<path:object_id>/requeue-from-step/", self.admin_site.admin_view(view),
                   name=URL_NAME)  # fmt: skip
        return [own, *super().get_urls()]

    def step_requeue_url(self, request: HttpRequest, obj: Any) -> Callable[[str], str] | None:
        if not self.has_requeue_permission(request):
            return None
        return lambda step: step_requeue_url(obj.pk, step)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {"alk_requeue_all": self.has_requeue_permission(request), **(extra_context or {})}
        return super().changelist_view(request, context)

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("died at"), ordering="died_at")
    def died(self, dead: DeadLetter) -> str:
        return when(dead.died_at)

    @admin.display(description=gettext_lazy("error"))
    def error(self, dead: DeadLetter) -> str:
        head: str | None = getattr(dead, "error_head", None)
        if head is None:
            head = dead.last_error or ""
        return head.split("\n", 1)[0][:160] or dead.reason

    @admin.display(description=gettext_lazy("attempts"))
    def attempts_of(self, dead: DeadLetter) -> str:
        return f"{dead.attempts}/{dead.max_attempts}"

    @admin.display(description=gettext_lazy("error"))
    def last_error_text(self, dead: DeadLetter) -> SafeString | str:
        return preformatted(dead.last_error)

    # -- actions ---------------------------------------------------------------------------

    @action(
        permissions=["requeue"],
        description=gettext_lazy("Requeue dead letter"),
        description_plural=gettext_lazy("Requeue selected dead letters"),
        location=BOTH_PLACES,
    )
    def requeue(self, request: HttpRequest, queryset: QuerySet[DeadLetter]) -> HttpResponse | None:
        if all_matching(request) and not confirmed(request):
            return confirmation(
                self,
                request,
                title=_("Requeue dead letters"),
                count=selection_count(request, queryset),
                question=_(
                    "Each becomes a live job again with the same id, payload and options, its "
                    "attempts reset to 0, due now."
                ),
                button=_("Yes, requeue them"),
                words={"error": _("error group")},
                values={"error": lambda print_: group_title(queryset.db, print_)},
            )
        rows, more = batch(queryset, "pk", "job_id", order="died_at")
        run = operations.requeue_each(
            queryset.db, rows, asked_ids(request, rows, more), system_clock()
        )
        record_requeue(request, run)
        message = self._requeue_message(run, more)
        self.message_user(request, message, messages.SUCCESS if run.requeued else messages.WARNING)
        if from_detail_page(request):
            return HttpResponseRedirect(self._after_requeue_url(request, run))
        return None

    def _requeue_message(self, run: RequeueRun, more: bool) -> SafeString:
        n = len(run.requeued)
        parts: list[str] = []
        if n == 1:
            job = run.requeued[0][1]
            text = _('Requeued 1 dead letter as <a href="{url}">job {job}</a>.')
            url = changelist_url(QueueMessage, f"id={job}")
            parts.append(format_html(text, url=url, job=job))
        elif n:
            ids = ",".join(str(job) for _n, job in run.requeued[:LINKED_IDS])
            text = ngettext(
                'Requeued {n} dead letter as <a href="{url}">a live job with the same id</a>.',
                'Requeued {n} dead letters as <a href="{url}">live jobs with the same ids</a>.',
                n,
            )
            parts.append(format_html(text, n=n, url=changelist_url(QueueMessage, f"id__in={ids}")))
        else:
            parts.append(_("Requeued no dead letter."))
        if run.kept:
            kept = ngettext(
                "%(n)d kept: a live job holds the same unique key (job %(job)s).",
                "%(n)d kept: a live job holds the same unique key (job %(job)s).",
                len(run.kept),
            )
            parts.append(kept % {"n": len(run.kept), "job": run.kept[0][1]})
        if run.gone:
            gone = ngettext(
                "%(n)d already gone (requeued or deleted by someone else).",
                "%(n)d already gone (requeued or deleted by someone else).",
                len(run.gone),
            )
            parts.append(gone % {"n": len(run.gone)})
        parts.append(more_note(more))
        return mark_safe(" ".join(conditional_escape(p) for p in parts if p))

    def _after_requeue_url(self, request: HttpRequest, run: RequeueRun) -> str:
        if len(run.requeued) == 1 and has_perm(request, QueueMessage, "view_queuemessage"):
            return reverse("admin:django_alkqueue_queuemessage_change", args=[run.requeued[0][1]])
        return changelist_url(DeadLetter)

    @action(
        permissions=["delete"],
        description=gettext_lazy("Delete dead letter"),
        description_plural=gettext_lazy("Delete selected dead letters"),
        location=BOTH_PLACES,
    )
    def delete_selected(
        self, request: HttpRequest, queryset: QuerySet[DeadLetter]
    ) -> HttpResponse | None:
        if not confirmed(request):
            return confirmation(
                self,
                request,
                title=_("Delete dead letters"),
                count=selection_count(request, queryset),
                question=_("These dead letters will be deleted for good; they cannot be requeued."),
                button=_("Yes, delete them"),
            )
        ids, more = batch(queryset)
        deleted = operations.purge_dead_letters(queryset.db, ids)
        if deleted:
            record(actor(request), DeadLetter, "delete", ids, DELETION)
        text = ngettext("Deleted %d dead letter.", "Deleted %d dead letters.", deleted) % deleted
        self.message_user(request, text + more_note(more), messages.SUCCESS)
        if from_detail_page(request):
            return HttpResponseRedirect(changelist_url(DeadLetter))
        return None
