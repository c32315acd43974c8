"""Finished jobs: the history of queues with `keep` (docs/running-jobs.md, "History
and recorded output"). A read-only list filtered by queue and outcome, with a date hierarchy
on finished_at, and a detail page with the output and the timings. Rows go with the leader's
history sweep, never from here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy, pgettext_lazy

from ..history import keeping_queues
from ..jobs import HISTORY_STATES
from ..models import FinishedJob
from ..reports.formats import format_age
from .base import QueueAdmin
from .date_links import date_links
from .filters import BatchFilter, QueueFilter
from .masking import PayloadPrivacy
from .steps_panel import StepsPanel
from .stored_text import masked_json, preformatted, pretty_json
from .times import when
from .workflow_panel import WorkflowPanel

OUTPUT_FIELD, OUTPUT_MASKED = "output_json", "output_masked"
#: The outcomes as the filter shows them.
OUTCOME_LABELS = {
    "succeeded": pgettext_lazy("state", "succeeded"),
    "cancelled": pgettext_lazy("state", "cancelled"),
}


class HistoryQueueFilter(QueueFilter):
    """The queues that keep history, besides those with a consumer, live jobs or dead
    letters: no query reads the history itself for names."""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = {name for name, _ in super().lookups(request, model_admin)}
        return [(name, name) for name in sorted(names | keeping_queues())]


class OutcomeFilter(admin.SimpleListFilter):
    """The outcomes; any but "succeeded" is answered by the partial index
    alkqueue_finished_other_idx, "succeeded" by the finished_at order itself (most rows)."""

    title = gettext_lazy("outcome")
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(state, str(OUTCOME_LABELS[state])) for state in HISTORY_STATES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        if value not in HISTORY_STATES:
            return queryset.none()
        if value == "succeeded":
            return queryset.filter(outcome=value)
        return queryset.filter(~Q(outcome="succeeded"), outcome=value)


class FinishedJobAdmin(StepsPanel, WorkflowPanel, PayloadPrivacy, QueueAdmin[FinishedJob]):
    job_id_field = "job_id"
    list_display = ("job_id", "queue", "outcome", "finished", "ran_for", "attempts", "worker_id")
    list_filter = (HistoryQueueFilter, OutcomeFilter, BatchFilter)
    date_hierarchy = "finished_at"
    search_fields = ("job_id", "concurrency_key")
    exact_search = True
    id_lookups = ("job_id",)
    search_help_text = gettext_lazy("A job id or a concurrency key (exact).")
    ordering = ("-finished_at",)
    sortable_by = ("finished_at",)
    changelist_defer = ("payload", "output", "output_error", "last_error")
    actions = None
    #: A sensitive queue's output is masked as its payload is (docs/security.md).
    masked_fields = {**PayloadPrivacy.masked_fields, OUTPUT_FIELD: OUTPUT_MASKED}
    readonly_fields = ("payload_json", "payload_masked", "output_json", "output_masked",
                       "output_error_text", "last_error_text", "ran_for", "waited",
                       "unique_window")  # fmt: skip
    fieldsets = (
        (None, {"fields": [("job_id", "queue", "outcome"), ("attempts", "max_attempts"),
                           ("priority", "unique_key", "concurrency_key"), "unique_window"]}),
        (gettext_lazy("Output"), {"fields": ["output_json", "output_error_text"]}),
        (gettext_lazy("Timings"), {"fields": [("enqueued_at", "started_at", "finished_at"),
                                ("waited", "ran_for"), ("worker_id", "delete_after")]}),
        (gettext_lazy("Payload"), {"fields": ["payload_json"]}),
        (gettext_lazy("Error of an earlier attempt"), {"fields": ["last_error_text"],
                                                       "classes": ["collapse"]}),
    )  # fmt: skip

    def has_delete_permission(self, request: HttpRequest, obj: FinishedJob | None = None) -> bool:
        return False  # the history sweep deletes, after the queue's keep

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        if isinstance(response, TemplateResponse) and response.context_data:
            cl = response.context_data.get("cl")
            response.context_data["alk_dates"] = None if cl is None else date_links(cl)
        return response

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("finished at"), ordering="finished_at")
    def finished(self, row: FinishedJob) -> str:
        return when(row.finished_at)

    @admin.display(description=gettext_lazy("ran for"))
    def ran_for(self, row: FinishedJob) -> str:
        if row.duration is None:
            return "-"
        return f"{row.duration * 1000:.1f} ms" if row.duration < 10 else format_age(row.duration)

    @admin.display(description=gettext_lazy("waited"))
    def waited(self, row: FinishedJob) -> str:
        """From the enqueue to the last attempt's claim."""
        if row.started_at is None:
            return "-"
        return format_age(max((row.started_at - row.enqueued_at).total_seconds(), 0))

    @admin.display(description=gettext_lazy("output"))
    def output_json(self, row: FinishedJob) -> SafeString | str:
        return "-" if row.output is None else pretty_json(row.output)

    @admin.display(description=gettext_lazy("output"))
    def output_masked(self, row: FinishedJob) -> SafeString | str:
        return "-" if row.output is None else masked_json(row.output)

    @admin.display(description=gettext_lazy("output not recorded"))
    def output_error_text(self, row: FinishedJob) -> SafeString | str:
        return preformatted(row.output_error)

    @admin.display(description=gettext_lazy("error"))
    def last_error_text(self, row: FinishedJob) -> SafeString | str:
        return preformatted(row.last_error)
