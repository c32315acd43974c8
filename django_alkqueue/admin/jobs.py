"""Live jobs: a read-only changelist and detail page, and the actions cancel, run now and
change priority."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import DELETION
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from .. import operations
from ..clock import system_clock
from ..jobs import live_state
from ..models import QueueMessage
from ..validation import PRIORITY_MAX, PRIORITY_MIN
from . import requeue_log
from .audit import record
from .base import QueueAdmin, format_age, timestamp
from .compat import BOTH_PLACES, action
from .confirmation import confirmation, confirmed
from .filters import QueueFilter, StateFilter
from .links import changelist_url
from .permissions import has_perm
from .selection import all_matching, batch, from_detail_page, more_note, selection_count
from .stored_text import PayloadPrivacy, preformatted


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX, initial=0)


def state_badge(state: str) -> SafeString:
    return format_html('<span class="alk-state alk-{}">{}</span>', state, state)


class QueueMessageAdmin(PayloadPrivacy, QueueAdmin[QueueMessage]):
    list_display = (
        "id",
        "queue",
        "state",
        "priority",
        "attempts_of",
        "run_at_short",
        "claimed_by",
        "lease_expiry",
        "age",
        "concurrency_key",
    )
    list_filter = (QueueFilter, StateFilter)
    search_fields = ("id", "unique_key")
    exact_search = True
    search_help_text = "A job id, or a unique key (exact)."
    #: ?queue=…&concurrency_key=… : alkqueue_concurrency_key_idx (queue, concurrency_key).
    exact_lookups = ("concurrency_key",)
    ordering = ("-id",)
    sortable_by = ("id",)
    changelist_defer = ("payload", "last_error")
    actions = ["cancel", "run_now", "change_priority"]
    readonly_fields = (
        "state",
        "payload_json",
        "payload_masked",
        "last_error_text",
        "requeued_from",
    )
    fieldsets = (
        (None, {"fields": [("queue", "state", "priority"), ("attempts", "max_attempts"),
                           ("unique_key", "concurrency_key"), "requeued_from"]}),
        ("Payload", {"fields": ["payload_json"]}),
        ("Last error", {"fields": ["last_error_text"]}),
        ("Timing", {"fields": [("enqueued_at", "run_at", "expires_at")]}),
        ("Claim", {"fields": [("claimed_by", "claimed_at", "lease_expires_at"), "claim_token"]}),
        ("Options", {"fields": [("backoff_base", "lease", "retention")], "classes": ["collapse"]}),
    )  # fmt: skip

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a live job is cancelled, never deleted as a row

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, QueueMessage, "cancel_queuemessage")

    def has_run_now_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, QueueMessage, "run_now_queuemessage")

    def has_change_priority_permission(self, request: HttpRequest) -> bool:
        return has_perm(request, QueueMessage, "change_priority_queuemessage")

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description="state")
    def state(self, job: QueueMessage) -> SafeString:
        return state_badge(live_state(job.claim_token is not None, job.run_at, system_clock()))

    @admin.display(description="attempts")
    def attempts_of(self, job: QueueMessage) -> str:
        return f"{job.attempts}/{job.max_attempts}"

    @admin.display(description="run at")
    def run_at_short(self, job: QueueMessage) -> str:
        return timestamp(job.run_at)

    @admin.display(description="lease expiry")
    def lease_expiry(self, job: QueueMessage) -> SafeString | str:
        if job.lease_expires_at is None:
            return "-"
        left = (job.lease_expires_at - system_clock()).total_seconds()
        if left > 0:
            return f"in {format_age(left)}"
        return format_html('<span class="alk-warn">lapsed {} ago</span>', format_age(-left))

    @admin.display(description="age")
    def age(self, job: QueueMessage) -> str:
        return format_age((system_clock() - job.enqueued_at).total_seconds())

    @admin.display(description="requeued from")
    def requeued_from(self, job: QueueMessage) -> str:
        origin = requeue_log.requeued_from(job.id)
        if origin is None:
            return "-"
        return f"dead letter #{origin.dead_letter_id} on {timestamp(origin.at)} by {origin.by}"

    @admin.display(description="last error")
    def last_error_text(self, job: QueueMessage) -> SafeString | str:
        return preformatted(job.last_error)

    # -- actions ---------------------------------------------------------------------------

    @action(
        permissions=["cancel"],
        description="Cancel job",
        description_plural="Cancel selected jobs",
        location=BOTH_PLACES,
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[QueueMessage]) -> HttpResponse | None:
        if not confirmed(request):
            return confirmation(
                self,
                request,
                title="Cancel jobs",
                count=selection_count(request, queryset),
                question="These jobs will be deleted from the queue, whatever their state. "
                "A worker running one of them will have its ack refused.",
                button="Yes, cancel them",
            )
        ids, more = batch(queryset)
        cancelled = [i for i in ids if operations.cancel(queryset.db, i)]
        if cancelled:
            record(request, QueueMessage, "cancel", cancelled, DELETION)
        text = ngettext("Cancelled %d job.", "Cancelled %d jobs.", len(cancelled))
        self.message_user(request, text % len(cancelled) + more_note(more), messages.SUCCESS)
        if from_detail_page(request):
            return HttpResponseRedirect(changelist_url(QueueMessage))
        return None

    @action(
        permissions=["run_now"],
        description="Run job now",
        description_plural="Run selected jobs now",
        location=BOTH_PLACES,
    )
    def run_now(
        self, request: HttpRequest, queryset: QuerySet[QueueMessage]
    ) -> HttpResponse | None:
        if all_matching(request) and not confirmed(request):
            return confirmation(
                self,
                request,
                title="Run jobs now",
                count=selection_count(request, queryset),
                question="The scheduled jobs among these become due now.",
                button="Yes, run them",
            )
        ids, more = batch(queryset)
        moved = operations.run_now(queryset.db, ids, system_clock())
        record(request, QueueMessage, "run now", ids, detail=f"{moved} moved from scheduled")
        text = ngettext("%d scheduled job is due now.", "%d scheduled jobs are due now.", moved)
        skipped = len(ids) - moved
        if skipped:
            text += f" {skipped} already pending or claimed stayed as they were."
        self.message_user(request, text % moved + more_note(more), messages.SUCCESS)
        return None

    @action(permissions=["change_priority"], description="Change priority", location=BOTH_PLACES)
    def change_priority(
        self, request: HttpRequest, queryset: QuerySet[QueueMessage]
    ) -> HttpResponse | None:
        form = PriorityForm(request.POST if confirmed(request) else None)
        if not form.is_valid():
            return confirmation(
                self,
                request,
                title="Change priority",
                count=selection_count(request, queryset),
                question=f"Higher runs first, from {PRIORITY_MIN} to {PRIORITY_MAX}.",
                button="Set priority",
                form=form,
            )
        priority = form.cleaned_data["priority"]
        ids, more = batch(queryset)
        changed = operations.change_priority(queryset.db, ids, priority)
        record(request, QueueMessage, f"change priority to {priority}", ids)
        text = ngettext(
            "Set the priority of %(n)d job to %(p)d.",
            "Set the priority of %(n)d jobs to %(p)d.",
            changed,
        )
        self.message_user(request, text % {"n": changed, "p": priority} + more_note(more))
        return None
