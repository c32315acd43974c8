"""Live jobs: a read-only changelist and detail page, and the actions cancel, run now and
change priority. A claimed job shows the progress its handler reports; a claimed job
cancelled while its handler runs is gone from the list but shown above it, and on its
page, as "cancel requested" until the handler has stopped (its CancelRequest row)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import DELETION
from django.db.models import OuterRef, QuerySet, Subquery
from django.db.models.functions import Substr
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import audit, operations
from ..clock import system_clock
from ..jobs import Progress, live_state, stored_progress
from ..models import CancelRequest, QueueMessage, WaitingJob
from ..privacy import masked_key
from ..reports.formats import format_age
from ..validation import PRIORITY_MAX, PRIORITY_MIN
from .audit import actor
from .base import LIVE_SECONDS, QueueAdmin, reload_without_scripts
from .compat import BOTH_PLACES, action
from .confirmation import confirmation, confirmed
from .filters import STATE_LABELS, BatchFilter, QueueFilter, StateFilter
from .links import changelist_url
from .masking import PayloadPrivacy, hidden_queues
from .permissions import has_perm
from .selection import all_matching, batch, from_detail_page, more_note, selection_count
from .signal_form import URL_NAME as SIGNAL_URL_NAME
from .signal_form import SignalPanel, send_signal_view
from .steps_panel import StepsPanel
from .stored_text import preformatted
from .times import detail, timestamp, waiting_words, when
from .workflow_panel import WorkflowPanel


class PriorityForm(forms.Form):
    priority = forms.IntegerField(
        min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, initial=0, label=gettext_lazy("Priority")
    )


def state_badge(state: str) -> SafeString:
    return format_html('<span class="alk-state alk-{}">{}</span>', state, STATE_LABELS[state])


class QueueMessageAdmin(
    SignalPanel, StepsPanel, WorkflowPanel, PayloadPrivacy, QueueAdmin[QueueMessage]
):
    #: What an operator reads first fits 1280 px beside the admin's sidebar and the filters:
    #: the rest is folded under the queue (its concurrency key) and under the state (when a
    #: scheduled job runs, who holds a claimed one and its lease, a priority other than 0).
    list_display = (
        "id",
        "queue_and_key",
        "state_and_when",
        "attempts_of",
        "age",
        "progress_bar",
        "error_head",
    )
    list_filter = (QueueFilter, StateFilter, BatchFilter)
    search_fields = ("id", "unique_key")
    exact_search = True
    search_help_text = gettext_lazy("A job id, or a unique key (exact).")
    #: ?queue=…&concurrency_key=… : alkqueue_concurrency_key_idx (queue, concurrency_key).
    exact_lookups = ("concurrency_key",)
    ordering = ("-id",)
    sortable_by = ("id",)
    changelist_defer = ("payload", "last_error")
    #: The most cancel requests listed above the jobs.
    cancel_requests_shown = 20
    actions = ["cancel", "run_now", "change_priority"]
    readonly_fields = (
        "state",
        "payload_json",
        "payload_masked",
        "last_error_text",
        "requeued_from",
        "progress_bar",
        "unique_window",
        "debounce_key_masked",
    )
    job_id_field = "id"
    fieldsets = (
        (None, {"fields": [("queue", "state", "priority"), ("attempts", "max_attempts"),
                           ("unique_key", "unique_window"), ("concurrency_key", "fair_key"),
                           ("debounce_key", "debounce_deadline"), "requeued_from"]}),
        (gettext_lazy("Payload"), {"fields": ["payload_json"]}),
        (gettext_lazy("Last error"), {"fields": ["last_error_text"]}),
        (gettext_lazy("Timing"), {"fields": [("enqueued_at", "requeued_at"),
                                             ("run_at", "expires_at")]}),
        (gettext_lazy("Claim"), {"fields": [("claimed_by", "claimed_at", "lease_expires_at"),
                                            "claim_token", "progress_bar"]}),
        (gettext_lazy("Options"), {"fields": [("backoff_base", "lease", "retention")],
                                   "classes": ["collapse"]}),
    )  # fmt: skip

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a live job is cancelled, never deleted as a row

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, QueueMessage, "cancel_queuemessage")

    def has_run_now_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, QueueMessage, "run_now_queuemessage")

    def has_change_priority_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, QueueMessage, "change_priority_queuemessage")

    def get_urls(self) -> list[URLPattern]:
        def view(request: HttpRequest, object_id: str) -> HttpResponse:
            return send_signal_view(self, request, object_id)

        own = path("<path:object_id>/signal/", self.admin_site.admin_view(view),
                   name=SIGNAL_URL_NAME)  # fmt: skip
        return [own, *super().get_urls()]

    # -- cancel requested ------------------------------------------------------------------

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        requests = CancelRequest.objects.using(self.using(request)).order_by("-requested_at")
        shown = list(requests[: self.cancel_requests_shown])
        context = {**(extra_context or {}), "alk_cancel_requests": shown, "alk_live": LIVE_SECONDS,
                   **reload_without_scripts(request)}  # fmt: skip
        return super().changelist_view(request, context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        response = super().change_view(request, object_id, form_url, extra_context)
        if not isinstance(response, HttpResponseRedirect) or request.method != "GET":
            return response
        # Django sends a missing job back to the index; a job cancelled while running
        # gets its own page until its handler has stopped (one query, on this path only).
        pending = cancel_request_of(self.using(request), object_id)
        if pending is None:
            return response
        return TemplateResponse(request, "admin/django_alkqueue/cancel_requested.html", {
            **self.admin_site.each_context(request), "opts": self.opts,
            "title": _("Job %(id)s: cancel requested") % {"id": pending.job_id}, "cancel": pending,
        })  # fmt: skip

    def using(self, request: HttpRequest) -> str:
        return self.get_queryset(request).db

    def lean(self, queryset: QuerySet[QueueMessage]) -> QuerySet[QueueMessage]:
        """The list reads the start of each error, never a whole traceback, and the signal
        a waiting job waits for (by the WaitingJob primary key)."""
        signal = WaitingJob.objects.filter(job_id=OuterRef("pk")).values("signal")[:1]
        return (
            super()
            .lean(queryset)
            .annotate(error_head=Substr("last_error", 1, 300), waiting_signal=Subquery(signal))
        )

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        hidden = hidden_queues(request)
        if not hidden:
            return shown
        return [queue_and_key_column(hidden) if name == "queue_and_key" else name
                for name in shown]  # fmt: skip

    @admin.display(description=gettext_lazy("queue"))
    def queue_and_key(self, job: QueueMessage) -> SafeString | str:
        return queue_and_key_column(frozenset())(job)

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("progress"))
    def progress_bar(self, job: QueueMessage) -> SafeString | str:
        if job.claim_token is None:
            return "-"
        progress = stored_progress(job.progress, job.progress_at)
        return "-" if progress is None else progress_html(progress)

    @admin.display(description=QueueMessage._meta.get_field("run_at").verbose_name)
    def run_at_shown(self, job: QueueMessage) -> SafeString | str:
        """The detail page's run_at: a waiting job has none, but says what it waits for."""
        if job.run_at is None and job.claim_token is None:
            return waiting_words(waiting_signal(job))
        return detail(job.run_at)

    @admin.display(description=gettext_lazy("state"))
    def state(self, job: QueueMessage) -> SafeString:
        return state_badge(live_state(job.claim_token is not None, job.run_at, system_clock()))

    @admin.display(description=gettext_lazy("state"))
    def state_and_when(self, job: QueueMessage) -> SafeString:
        """The state's badge, then what it waits on: when a scheduled job runs, the worker
        holding a claimed one and its lease; and a priority other than 0."""
        state = live_state(job.claim_token is not None, job.run_at, system_clock())
        details: list[SafeString | str] = []
        if state == "scheduled":
            details.append(when(job.run_at))
        elif state == "waiting":
            details.append(waiting_words(waiting_signal(job)))
        elif state == "claimed":
            details += [job.claimed_by or "-", lease_words(job)]
        if job.priority:
            details.append(_("priority %(n)d") % {"n": job.priority})
        if not details:
            return state_badge(state)
        return format_html('{}<div class="alk-sub">{}</div>', state_badge(state),
                           format_html_join(", ", "{}", ((d,) for d in details)))  # fmt: skip

    @admin.display(description=gettext_lazy("last error"))
    def error_head(self, job: QueueMessage) -> SafeString | str:
        """The first line of the last error, cut to the cell; all of it in the title."""
        # The list annotates error_head (lean); another caller reads the row's own text.
        head = job.error_head if hasattr(job, "error_head") else job.last_error
        line = (head or "").split("\n", 1)[0]
        if not line:
            return "-"
        return format_html('<span class="alk-error-head" title="{}">{}</span>', line, line)

    @admin.display(description=gettext_lazy("attempts"))
    def attempts_of(self, job: QueueMessage) -> str:
        return f"{job.attempts}/{job.max_attempts}"

    @admin.display(description=gettext_lazy("age"))
    def age(self, job: QueueMessage) -> str:
        return format_age((system_clock() - job.enqueued_at).total_seconds())

    @admin.display(description=gettext_lazy("requeued from"))
    def requeued_from(self, job: QueueMessage) -> str:
        origin = audit.requeued_from(job.id)
        if origin is None:
            return "-"
        text = _("dead letter #%(id)s on %(at)s by %(by)s")
        return text % {"id": origin.dead_letter_id, "at": timestamp(origin.at), "by": origin.by}

    @admin.display(description=gettext_lazy("last error"))
    def last_error_text(self, job: QueueMessage) -> SafeString | str:
        return preformatted(job.last_error)

    # -- actions ---------------------------------------------------------------------------

    @action(
        permissions=["cancel"],
        description=gettext_lazy("Cancel job"),
        description_plural=gettext_lazy("Cancel selected jobs"),
        location=BOTH_PLACES,
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[QueueMessage]) -> HttpResponse | None:
        if not confirmed(request):
            return confirmation(
                self,
                request,
                title=_("Cancel jobs"),
                count=selection_count(request, queryset),
                question=_(
                    "These jobs will be deleted from the queue, whatever their state. A worker "
                    "running one of them is told to stop (job.cancelled) and will have its ack "
                    "refused; it shows as cancel requested until its handler has stopped."
                ),
                button=_("Yes, cancel them"),
            )
        ids, more = batch(queryset)
        cancelled = operations.cancel_many(queryset.db, ids, system_clock())
        if cancelled:
            audit.record(actor(request), QueueMessage, "cancel", cancelled, DELETION)
        text = ngettext("Cancelled %d job.", "Cancelled %d jobs.", len(cancelled))
        self.message_user(request, text % len(cancelled) + more_note(more), messages.SUCCESS)
        if from_detail_page(request):
            return HttpResponseRedirect(changelist_url(QueueMessage))
        return None

    @action(
        permissions=["run_now"],
        description=gettext_lazy("Run job now"),
        description_plural=gettext_lazy("Run selected jobs now"),
        location=BOTH_PLACES,
    )
    def run_now(
        self, request: HttpRequest, queryset: QuerySet[QueueMessage]
    ) -> HttpResponse | None:
        if all_matching(request) and not confirmed(request):
            return confirmation(
                self,
                request,
                title=_("Run jobs now"),
                count=selection_count(request, queryset),
                question=_("The scheduled jobs among these become due now."),
                button=_("Yes, run them"),
            )
        ids, more = batch(queryset)
        moved = operations.run_now(queryset.db, ids, system_clock())
        audit.record(
            actor(request), QueueMessage, "run now", ids, detail=f"{moved} moved from scheduled"
        )
        text = ngettext("%d scheduled job is due now.", "%d scheduled jobs are due now.", moved)
        text %= moved
        skipped = len(ids) - moved
        if skipped:
            stayed = ngettext(
                " %(n)d already pending or claimed stayed as they were.",
                " %(n)d already pending or claimed stayed as they were.",
                skipped,
            )
            text += stayed % {"n": skipped}
        self.message_user(request, text + more_note(more), messages.SUCCESS)
        return None

    @action(
        permissions=["change_priority"],
        description=gettext_lazy("Change priority"),
        location=BOTH_PLACES,
    )
    def change_priority(
        self, request: HttpRequest, queryset: QuerySet[QueueMessage]
    ) -> HttpResponse | None:
        form = PriorityForm(request.POST if confirmed(request) else None)
        if not form.is_valid():
            return confirmation(
                self,
                request,
                title=_("Change priority"),
                count=selection_count(request, queryset),
                question=_("Higher runs first, from %(min)d to %(max)d.")
                % {"min": PRIORITY_MIN, "max": PRIORITY_MAX},
                button=_("Set priority"),
                form=form,
            )
        priority = form.cleaned_data["priority"]
        ids, more = batch(queryset)
        changed = operations.change_priority(queryset.db, ids, priority)
        audit.record(actor(request), QueueMessage, f"change priority to {priority}", ids)
        text = ngettext(
            "Set the priority of %(n)d job to %(p)d.",
            "Set the priority of %(n)d jobs to %(p)d.",
            changed,
        )
        self.message_user(request, text % {"n": changed, "p": priority} + more_note(more))
        return None


def waiting_signal(job: QueueMessage) -> str | None:
    """The signal a waiting job waits for; None: it waits for its dependencies. The list
    annotates it (lean); the detail page reads it (one query)."""
    if hasattr(job, "waiting_signal"):
        annotated: str | None = getattr(job, "waiting_signal")  # noqa: B009 (an annotation)
        return annotated
    rows = WaitingJob.objects.using(job._state.db or "default").filter(job_id=job.id)
    return rows.values_list("signal", flat=True).first()


def lease_words(job: QueueMessage) -> SafeString | str:
    """When a claimed job's lease ends, or how long ago it lapsed (in red)."""
    if job.lease_expires_at is None:
        return "-"
    left = (job.lease_expires_at - system_clock()).total_seconds()
    if left > 0:
        return _("lease ends in %(age)s") % {"age": format_age(left)}
    return format_html('<span class="alk-warn">{}</span>',
                       _("lease lapsed %(age)s ago") % {"age": format_age(-left)})  # fmt: skip


def queue_and_key_column(hidden: frozenset[str]) -> Callable[[QueueMessage], SafeString | str]:
    """The list's queue column: the queue, and under it the job's concurrency key (masked
    on the rows of the `hidden` queues, as the key column of PayloadPrivacy is)."""

    @admin.display(description=gettext_lazy("queue"))
    def queue_and_key(job: QueueMessage) -> SafeString | str:
        key = masked_key(job.concurrency_key) if job.queue in hidden else job.concurrency_key
        if key is None:
            return job.queue
        return format_html('{}<div class="alk-sub" title="{}">{}</div>', job.queue,
                           _("concurrency key"), key)  # fmt: skip

    return queue_and_key


def cancel_request_of(using: str, object_id: str) -> CancelRequest | None:
    """The cancel request of the job whose page was asked for, if there is one."""
    if not object_id.isdigit():
        return None
    return CancelRequest.objects.using(using).filter(job_id=int(object_id)).first()


def progress_html(progress: Progress) -> SafeString:
    """A bar when the job reported a total, then done/total (or done) and the note."""
    fraction = progress.fraction()
    amount = f"{progress.done:g}" if progress.total is None else (
        f"{progress.done:g}/{progress.total:g}")  # fmt: skip
    if fraction is None:
        return format_html('<span class="alk-progress">{} {}</span>', amount, progress.note)
    return format_html(
        '<span class="alk-progress"><progress value="{}" max="1"></progress> {} ({}%) {}</span>',
        f"{fraction:.3f}", amount, round(fraction * 100), progress.note,
    )  # fmt: skip
