"""Batches (docs/workflows.md): a read-only list and page of each batch with its progress,
its members' outcomes and its callbacks (whether each fired, and the job it enqueued), and
links that open the job, dead letter and finished job lists on its members (?batch=<id>).

The list reads the counts of its page's batches in one query over alkqueue_batch_member_idx,
and where their callback jobs stand in at most three more: never one query per row."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import admin
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from ..clock import system_clock
from ..models import Batch, BatchCounts, BatchMember, DeadLetter, FinishedJob, QueueMessage
from ..workflows.standing import Standing, standings
from .base import QueueAdmin
from .filters import ALL_STATE_LABELS
from .links import changelist_url, job_page_url
from .permissions import has_perm
from .times import when

#: The callbacks, as the pages name them: (column holding the stored spec, column holding
#: the id of the job it enqueued, label).
CALLBACKS = (
    ("on_success", "success_job_id", gettext_lazy("on success")),
    ("on_finish", "finish_job_id", gettext_lazy("on finish")),
)


def counts_by_batch(using: str, ids: Iterable[int]) -> dict[int, BatchCounts]:
    """Batch.counts() of each of `ids`, in one query."""
    by: dict[int, dict[str | None, int]] = {i: {} for i in ids}
    members = BatchMember.objects.using(using).filter(batch_id__in=list(by))
    rows = members.values_list("batch_id", "outcome").annotate(n=Count("job_id")).order_by()
    for batch_id, outcome, n in rows:
        by[batch_id][outcome] = n
    return {
        batch_id: BatchCounts(
            total=sum(found.values()),
            succeeded=found.get("succeeded", 0),
            dead=found.get("dead", 0),
            cancelled=found.get("cancelled", 0),
            pending=found.get(None, 0),
        )
        for batch_id, found in by.items()
    }


def callback_job_ids(batches: Iterable[Batch]) -> set[int]:
    return {
        job_id
        for batch in batches
        for _spec, column, _label in CALLBACKS
        if (job_id := getattr(batch, column)) is not None
    }


class BatchAdmin(QueueAdmin[Batch]):
    list_display = ("id", "name", "created", "status", "progress", "succeeded", "dead",
                    "cancelled", "pending", "on_success_shown", "on_finish_shown")  # fmt: skip
    search_fields = ("id",)
    exact_search = True
    search_help_text = gettext_lazy("A batch id (exact).")
    ordering = ("-id",)
    sortable_by = ("id",)
    actions = None
    readonly_fields = ("created", "status", "progress", "outcomes", "fired", "on_success_shown",
                       "on_finish_shown", "members")  # fmt: skip
    fieldsets = (
        (None, {"fields": [("name", "created", "status"), "progress", "outcomes", "members"]}),
        (gettext_lazy("Callbacks"), {"fields": ["on_success_shown", "on_finish_shown",
                                                "fired"]}),
    )  # fmt: skip

    def has_delete_permission(self, request: HttpRequest, obj: Batch | None = None) -> bool:
        return False  # a batch goes with its rows, never from here

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        if isinstance(response, TemplateResponse) and response.context_data:
            cl = response.context_data.get("cl")
            if cl is not None:
                cl.result_list = list(cl.result_list)
                self._read_figures(self.get_queryset(request).db, cl.result_list, request)
        return response

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Batch | None:
        batch = super().get_object(request, object_id, from_field)
        if batch is not None:
            self._read_figures(batch._state.db or "default", [batch], request)
        return batch

    def _read_figures(self, using: str, batches: list[Batch], request: HttpRequest) -> None:
        """Each batch's counts, where its callback jobs stand, and what the user may open."""
        counts = counts_by_batch(using, [b.id for b in batches])
        jobs = standings(using, callback_job_ids(batches), system_clock())
        for batch in batches:
            batch.alk_counts = counts[batch.id]  # type: ignore[attr-defined]
            batch.alk_jobs = jobs  # type: ignore[attr-defined]
            batch.alk_request = request  # type: ignore[attr-defined]

    # -- columns ---------------------------------------------------------------------------

    @admin.display(description=gettext_lazy("created at"))
    def created(self, batch: Batch) -> str:
        return when(batch.created_at)

    @admin.display(description=gettext_lazy("status"))
    def status(self, batch: Batch) -> SafeString | str:
        if batch.fired_at is not None:
            return format_html("{} {}", pgettext_lazy("batch", "fired"), when(batch.fired_at))
        if batch.sealed_at is None:
            return str(pgettext_lazy("batch", "open"))
        return str(pgettext_lazy("batch", "sealed"))

    @admin.display(description=gettext_lazy("progress"))
    def progress(self, batch: Batch) -> SafeString:
        counts = _counts(batch)
        done = counts.total - counts.pending
        return format_html(
            '<span class="alk-progress"><progress value="{}" max="{}"></progress> {}/{}</span>',
            done, max(counts.total, 1), done, counts.total,
        )  # fmt: skip

    @admin.display(description=pgettext_lazy("state", "succeeded"))
    def succeeded(self, batch: Batch) -> int:
        return _counts(batch).succeeded

    @admin.display(description=pgettext_lazy("state", "dead"))
    def dead(self, batch: Batch) -> int:
        return _counts(batch).dead

    @admin.display(description=pgettext_lazy("state", "cancelled"))
    def cancelled(self, batch: Batch) -> int:
        return _counts(batch).cancelled

    @admin.display(description=pgettext_lazy("state", "pending"))
    def pending(self, batch: Batch) -> int:
        return _counts(batch).pending

    @admin.display(description=gettext_lazy("outcomes"))
    def outcomes(self, batch: Batch) -> str:
        counts = _counts(batch)
        text = _("%(succeeded)d succeeded, %(dead)d dead, %(cancelled)d cancelled, "
                 "%(pending)d not finished")  # fmt: skip
        return text % counts._asdict()

    @admin.display(description=gettext_lazy("fired at"))
    def fired(self, batch: Batch) -> str:
        return "-" if batch.fired_at is None else when(batch.fired_at)

    @admin.display(description=gettext_lazy("on success"))
    def on_success_shown(self, batch: Batch) -> SafeString | str:
        return callback_html(batch, *CALLBACKS[0][:2])

    @admin.display(description=gettext_lazy("on finish"))
    def on_finish_shown(self, batch: Batch) -> SafeString | str:
        return callback_html(batch, *CALLBACKS[1][:2])

    @admin.display(description=gettext_lazy("members"))
    def members(self, batch: Batch) -> SafeString:
        request: HttpRequest = batch.alk_request  # type: ignore[attr-defined]
        query = f"batch={batch.id}"
        lists = [
            (QueueMessage, "view_queuemessage", _("members in Jobs")),
            (DeadLetter, "view_deadletter", _("in Dead letters")),
            (FinishedJob, "view_finishedjob", _("in Finished jobs")),
        ]
        shown = [(changelist_url(model, query), label) for model, perm, label in lists
                 if has_perm(request, model, perm)]  # fmt: skip
        return format_html_join(
            " · ", '<a href="{}" class="alk-members-link">{}</a>', shown
        ) or SafeString("-")


def _counts(batch: Batch) -> BatchCounts:
    """The counts the page read for it (changelist_view, get_object), else its own query."""
    found: BatchCounts | None = getattr(batch, "alk_counts", None)
    return found if found is not None else batch.counts()


def callback_html(batch: Batch, spec_column: str, job_column: str) -> SafeString | str:
    """`queue`, then whether it fired: the job it enqueued (linked to its page), "not
    enqueued" when the batch fired without it (on success after a failure), or "not fired"."""
    spec: dict[str, Any] | None = getattr(batch, spec_column)
    if not spec:
        return "-"
    queue = str(spec.get("queue", "?"))
    job_id: int | None = getattr(batch, job_column)
    if job_id is not None:
        jobs: dict[int, Standing] = getattr(batch, "alk_jobs", {})
        standing = jobs.get(job_id, Standing(job_id, "gone"))
        url = job_page_url(standing)
        label = _("fired: job %(id)d (%(state)s)") % {"id": job_id, "state": state_label(standing)}
        if url:
            return format_html('{} <a href="{}">{}</a>', queue, url, label)
        return format_html("{} {}", queue, label)
    if batch.fired_at is not None:
        return format_html('{} <span class="alk-muted">{}</span>', queue, _("not enqueued"))
    return format_html('{} <span class="alk-muted">{}</span>', queue, _("not fired yet"))


def state_label(standing: Standing) -> str:
    return str(ALL_STATE_LABELS.get(standing.state, standing.state))
