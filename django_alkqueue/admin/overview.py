"""The queue overview and the queue detail page: custom admin views, registered as the
QueueStat admin so that the app's section of the admin index links to them ("Queue overview",
QueueStat's verbose_name_plural).

The figures come from `status` (the same numbers `alk_status` prints) and the QueueStat
minutes; the charts are server-side SVG; the health checks are read from the catalog.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from .. import history, operations
from ..clock import system_clock
from ..conf import get_settings
from ..models import Consumer, DeadLetter, FinishedJob, QueueMessage, QueueStat, Worker
from ..reports import database_health, flow_status, queue_stats, status
from ..reports.formats import format_age
from ..reports.frequent_errors import frequent_errors
from ..sql import dialect_for
from . import charts, fair_weights, queue_charts
from .base import LIVE_SECONDS, NUL, ModelAdmin, reload_without_scripts
from .links import changelist_url, queue_page_url
from .masking import flows_as_seen
from .permissions import has_perm, may_view

#: A pending job waiting longer than this is highlighted.
SLOW_PENDING_AGE = 300.0
#: Queues one overview page lists; the totals row counts every queue.
QUEUES_PER_PAGE = 100
#: Error groups the error groups page lists, largest first.
ERROR_GROUPS = 50


@dataclasses.dataclass(frozen=True)
class OverviewRow:
    figures: status.QueueRow
    rate: queue_stats.Throughput
    chart: SafeString

    @property
    def url(self) -> str | None:
        return queue_page_url(self.figures.queue)

    @property
    def oldest(self) -> str:
        return format_age(self.figures.oldest_pending_age) if self.figures.pending else "-"

    @property
    def handler_name(self) -> str:
        """The handler's own name; its module is in the title and on the detail page."""
        return (self.figures.handler or "").rsplit(".", 1)[-1]

    @property
    def slow(self) -> bool:
        return self.figures.oldest_pending_age >= SLOW_PENDING_AGE


def overview_page(
    using: str,
    now: datetime,
    search: str,
    number: str | None,
    window: charts.Window = charts.DEFAULT_WINDOW,
) -> OverviewPage:
    """One page of queues, those whose name holds `search` (any case), with their figures,
    throughput and charts over `window`; and the totals of every queue. Five queries (six for
    a window of hourly buckets), whatever the size; only the page's charts are drawn."""
    figures = status.queue_overview(using, now)
    rates = queue_stats.throughput(using, now)
    matching = [f for f in figures if search.casefold() in f.queue.casefold()]
    page = Paginator(matching, QUEUES_PER_PAGE).get_page(number)
    hours = window.span.total_seconds() / 3600
    shown = [row.queue for row in page.object_list]
    if window.bucket % timedelta(hours=1):
        series = queue_stats.history(using, now, hours, queues=shown)
    else:  # a bucket of whole hours: the database sums the minutes
        series = queue_stats.hourly_history(using, now, hours, shown)
    rows = [
        OverviewRow(
            row,
            rates.get(row.queue, queue_stats.Throughput()),
            charts.sparkline(
                row.queue, charts.bucketize(series.get(row.queue, []), now, window), window
            ),
        )
        for row in page.object_list
    ]
    flows = status.flow_overview(using, now, list(page.object_list))
    return OverviewPage(rows, page, len(matching), totals(figures, rates), list(flows.values()))


@dataclasses.dataclass(frozen=True)
class OverviewPage:
    rows: list[OverviewRow]
    page: Page[status.QueueRow]
    matching: int
    totals: dict[str, Any]
    #: The page's queues with limits in force, and their flow figures.
    flows: list[flow_status.FlowFigures] = dataclasses.field(default_factory=list)


def totals(
    figures: list[status.QueueRow], rates: dict[str, queue_stats.Throughput]
) -> dict[str, Any]:
    counted = ("pending", "scheduled", "sleeping", "waiting", "claimed", "dead")
    rated = ("finished_5m", "failed_5m", "finished_1h", "failed_1h", "snoozed_1h")
    total: dict[str, Any] = {f: sum(getattr(r, f) for r in figures) for f in counted}
    total |= {f: sum(getattr(r, f) for r in rates.values()) for f in rated}
    oldest = max((r.oldest_pending_age for r in figures if r.pending), default=None)
    total["oldest"] = format_age(oldest) if oldest is not None else "-"
    total["queues"] = len(figures)
    return total


class QueueStatAdmin(ModelAdmin[QueueStat]):
    """No changelist of raw minutes: the overview takes its place."""

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("", view(self.overview_view), name="django_alkqueue_queuestat_changelist"),
            path(
                "queue/<str:name>/", view(self.queue_view), name="django_alkqueue_queuestat_queue"
            ),
            path("errors/", view(self.errors_view), name="django_alkqueue_queuestat_errors"),
        ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_view(request, QueueStat)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[QueueStat]:
        return super().get_queryset(request).none()

    def _context(self, request: HttpRequest, title: str) -> dict[str, Any]:
        if not self.has_view_permission(request):
            raise PermissionDenied
        reload = reload_without_scripts(request)  # stands in for live.js when scripts are off
        window = charts.window_from(request.GET.get("window"))
        others = {k: request.GET[k] for k in request.GET if k not in ("window", "p")}
        return {
            "window": window,
            "windows": [
                (choice, "?" + urlencode({**others, "window": choice.key}))
                for choice in charts.WINDOWS.values()
            ],
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "live_seconds": LIVE_SECONDS,
            "refresh": reload["alk_refresh"],
            "refresh_toggle": reload["alk_refresh_toggle"],
            "can_view_jobs": has_perm(request, QueueMessage, "view_queuemessage"),
            "can_view_dead": has_perm(request, DeadLetter, "view_deadletter"),
            "can_view_finished": has_perm(request, FinishedJob, "view_finishedjob"),
            "can_view_consumers": has_perm(request, Consumer, "view_consumer"),
            "can_view_workers": has_perm(request, Worker, "view_worker"),
            "jobs_url": changelist_url(QueueMessage),
            "dead_url": changelist_url(DeadLetter),
            "finished_url": changelist_url(FinishedJob),
            "consumers_url": changelist_url(Consumer),
            "workers_url": changelist_url(Worker),
            "errors_url": reverse("admin:django_alkqueue_queuestat_errors"),
            "can_requeue": has_perm(request, DeadLetter, "requeue_deadletter"),
        }

    def overview_view(self, request: HttpRequest) -> HttpResponse:
        context = self._context(request, _("Queue overview"))
        using, now = QueueStat.objects.db, system_clock()
        search = request.GET.get("q", "").strip()
        shown = overview_page(using, now, search, request.GET.get("p"), context["window"])
        workers = status.worker_overview(using, now)
        others = {k: request.GET[k] for k in request.GET if k != "p"}
        context |= {
            "rows": shown.rows,
            "page": shown.page,
            "matching": shown.matching,
            "search": search,
            "page_query": urlencode(others) + "&" if others else "",
            "totals": shown.totals,
            "flows": flows_as_seen(request, shown.flows),
            "workers": workers,
            "live_workers": sum(1 for w in workers if not w.stale),
            "stale_workers": sum(1 for w in workers if w.stale),
            "leader": next((w.worker_id for w in workers if w.is_leader and not w.stale), None),
            "checks": database_health.run_checks(
                using, now, session_sql=has_perm(request, QueueStat, "view_session_sql")
            ),
            "catalog_health": dialect_for(connections[using]).supports_catalog_health,
            "now": now,
        }
        return TemplateResponse(request, "admin/django_alkqueue/overview.html", context)

    def errors_view(self, request: HttpRequest) -> HttpResponse:
        """The largest error groups across every queue (view_deadletter only: the titles
        come from dead letters' error texts)."""
        context = self._context(request, _("Error groups"))
        if not context["can_view_dead"]:
            raise PermissionDenied
        context["errors"] = frequent_errors(QueueStat.objects.db, limit=ERROR_GROUPS)
        return TemplateResponse(request, "admin/django_alkqueue/errors.html", context)

    def queue_view(self, request: HttpRequest, name: str) -> HttpResponse:
        context = self._context(request, _("Queue %(name)s") % {"name": name})
        using, now = QueueStat.objects.db, system_clock()
        if NUL in name:
            raise Http404("no queue name holds a NUL character")
        if request.method == "POST":
            return fair_weights.set_weight(request, using, name)
        consumer = Consumer.objects.using(using).filter(queue=name).first()
        figures = operations.stats(using, name, now)
        live = figures.pending + figures.scheduled + figures.waiting + figures.claimed
        if consumer is None and not (live or figures.dead):
            raise Http404(f"no queue {name!r}: no consumer, live job or dead letter names it")
        window: charts.Window = context["window"]
        hours = window.span.total_seconds() / 3600
        points = queue_stats.history(using, now, hours, queue=name, with_times=True).get(name, [])
        buckets = charts.bucketize(points, now, window)
        # The group titles come from dead letters' error texts: whoever may not open the
        # dead letters may not read them here either.
        errors = frequent_errors(using, name) if context["can_view_dead"] else []
        limits = flow_status.in_force(
            name, *((consumer.code_limits, consumer.limit_overrides) if consumer else (None, None))
        )
        flow = (
            flow_status.figures(using, name, now, limits, figures.pending, figures.claimed)
            if limits.limits.any()
            else None
        )
        context |= {
            "name": name,
            "flow": flows_as_seen(request, [flow])[0] if flow else None,
            "figures": figures,
            "oldest": format_age(figures.oldest_pending_age) if figures.pending else "-",
            "rate": queue_stats.throughput(using, now).get(name, queue_stats.Throughput()),
            "charts": [
                (_("Throughput"), queue_charts.throughput_chart(name, buckets, window)),
                (_("Jobs by state"), queue_charts.depth_chart(name, buckets, window)),
                (_("Wait time"), queue_charts.timing_chart(name, buckets, window, "wait")),
                (_("Run time"), queue_charts.timing_chart(name, buckets, window, "run")),
            ],
            "consumer": consumer,
            "code_handler": None if consumer else status.code_handler(name),
            "errors": errors,
            "query": urlencode({"queue": name}),
            "keeps": history.keep_for(name) is not None,
            "stale_after": get_settings().WORKER_STALE_AFTER,
            **fair_weights.fair_context(request, using, name, consumer, now),
        }
        return TemplateResponse(request, "admin/django_alkqueue/queue.html", context)
