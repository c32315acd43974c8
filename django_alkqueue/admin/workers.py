"""Workers: one row per running alk_worker process, stale ones marked."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..clock import system_clock
from ..conf import get_settings
from ..models import Worker
from ..reports.formats import format_age, grouped
from .base import QueueAdmin
from .filters import WorkerStateFilter
from .stored_text import cell
from .times import when


def is_stale(worker: Worker) -> bool:
    age = (system_clock() - worker.last_heartbeat_at).total_seconds()
    return age > get_settings().WORKER_STALE_AFTER


class WorkerAdmin(QueueAdmin[Worker]):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "queue_names",
        "concurrency",
        "started",
        "heartbeat",
        "done_failed",
        "leader",
    )
    list_filter = (WorkerStateFilter,)
    search_fields = ("worker_id", "hostname")
    ordering = ("worker_id",)
    readonly_fields = ("heartbeat", "queue_names")
    fields = (
        "worker_id",
        "hostname",
        "pid",
        "queue_names",
        "concurrency",
        "started_at",
        "heartbeat",
        "last_heartbeat_at",
        "jobs_processed",
        "jobs_failed",
        "is_leader",
    )

    @admin.display(description=gettext_lazy("done / failed"))
    def done_failed(self, worker: Worker) -> str:
        return f"{grouped(worker.jobs_processed)} / {grouped(worker.jobs_failed)}"

    @admin.display(description=gettext_lazy("role"))
    def leader(self, worker: Worker) -> str:
        return _("leader") if worker.is_leader else "-"

    @admin.display(description=gettext_lazy("queues"))
    def queue_names(self, worker: Worker) -> str:
        return cell(", ".join(worker.queues))

    @admin.display(description=gettext_lazy("started"), ordering="started_at")
    def started(self, worker: Worker) -> str:
        return when(worker.started_at)

    @admin.display(description=gettext_lazy("last heartbeat"), ordering="last_heartbeat_at")
    def heartbeat(self, worker: Worker) -> SafeString:
        ago = format_age((system_clock() - worker.last_heartbeat_at).total_seconds())
        if is_stale(worker):
            return format_html(_('<span class="alk-state alk-stale">stale</span> {} ago'), ago)
        return format_html(_('<span class="alk-state alk-live">live</span> {} ago'), ago)
