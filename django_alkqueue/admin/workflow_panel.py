"""The Workflow panel of a job's page (live job, dead letter, finished job): the jobs it waits
for and those waiting for it, each with its state and a link to its page; the batch it
belongs to; and the graph of its workflow when that has at most GRAPH_LIMIT jobs.

A job in no workflow costs the page two queries (its edges, its batch membership). One in
a workflow reads the edges outwards, one query per step and at most GRAPH_LIMIT + 1, and
where the jobs stand in at most three (workflows/standing.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString

from ..clock import system_clock
from ..models import Batch, BatchMember, DeadLetter, FinishedJob, QueueMessage
from ..workflows.component import component_of
from ..workflows.graph import layered
from ..workflows.standing import Standing, standings
from .filters import ALL_STATE_LABELS
from .links import job_page_url
from .permissions import has_perm
from .workflow_svg import legend, workflow_svg

#: The most jobs a drawn workflow has; a larger one gets a sentence instead.
GRAPH_LIMIT = 50
#: The most jobs each of the panel's two lists shows.
LISTED = 100


@dataclasses.dataclass(frozen=True)
class Listed:
    """A job the panel lists: where it stands and the link to its page (None: none to open)."""

    standing: Standing
    url: str | None

    @property
    def label(self) -> str:
        return str(ALL_STATE_LABELS.get(self.standing.state, self.standing.state))


def linker(request: HttpRequest) -> Callable[[Standing], str | None]:
    """job_page_url, for the pages the user may open."""
    may = {
        "live": has_perm(request, QueueMessage, "view_queuemessage"),
        "dead": has_perm(request, DeadLetter, "view_deadletter"),
        "kept": has_perm(request, FinishedJob, "view_finishedjob"),
    }

    def url_of(standing: Standing) -> str | None:
        place = "dead" if standing.dead_letter_id else "kept" if standing.kept else "live"
        return job_page_url(standing) if may[place] else None

    return url_of


def workflow_panel(request: HttpRequest, using: str, job_id: int) -> SafeString | None:
    """The panel's HTML, or None when the job is in no workflow."""
    member = BatchMember.objects.using(using).select_related("batch").filter(job_id=job_id)
    membership = member.first()
    component = component_of(using, job_id, GRAPH_LIMIT)
    if membership is None and len(component.nodes) == 1:
        return None
    waits_for = sorted(e.depends_on for e in component.edges if e.job_id == job_id)[:LISTED]
    waited_by = sorted(e.job_id for e in component.edges if e.depends_on == job_id)[:LISTED]
    shown = component.nodes if component.complete else {job_id, *waits_for, *waited_by}
    # A met edge's dependency succeeded, even when no table holds it any more.
    remembered = {e.depends_on: "succeeded" for e in component.edges if e.met}
    found = standings(using, shown, system_clock(), remembered)
    url_of = linker(request)
    context: dict[str, Any] = {
        "waits_for": [Listed(found[i], url_of(found[i])) for i in waits_for],
        "waited_by": [Listed(found[i], url_of(found[i])) for i in waited_by],
        "batch": membership.batch if membership else None,
        "batch_url": batch_url(request, membership.batch) if membership else None,
        "outcome": ALL_STATE_LABELS.get(membership.outcome or "") if membership else None,
        "jobs": len(component.nodes),
        "limit": GRAPH_LIMIT,
        "too_large": not component.complete,
        "graph": None,
    }
    if component.complete and len(component.nodes) > 1:
        graph = layered(component.nodes, component.edges)
        context["graph"] = workflow_svg(graph, found, job_id, url_of)
        context["legend"] = legend(found)
    return render_to_string("admin/django_alkqueue/workflow_panel.html", context, request)


def batch_url(request: HttpRequest, batch: Batch) -> str | None:
    if not has_perm(request, Batch, "view_batch"):
        return None
    return reverse("admin:django_alkqueue_batch_change", args=[batch.id])


class WorkflowPanel(admin.ModelAdmin):  # type: ignore[type-arg]
    """Mix into the ModelAdmin of a page showing one job: its change form gets the panel."""

    change_form_template = "admin/django_alkqueue/workflow_change_form.html"
    #: The field of this page's rows that holds the job's id.
    job_id_field = "id"

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Model | None = None,
    ) -> HttpResponse:
        if obj is not None:
            job_id = getattr(obj, self.job_id_field)
            context["alk_workflow"] = workflow_panel(request, obj._state.db or "default", job_id)
        return super().render_change_form(request, context, add, change, form_url, obj)
