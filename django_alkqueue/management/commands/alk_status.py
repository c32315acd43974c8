"""`manage.py alk_status`: the per-queue table and the live workers, as text or JSON."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from django.core.management.base import CommandParser
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext, pgettext_lazy

from django_alkqueue.clock import system_clock
from django_alkqueue.privacy import sensitive_queues
from django_alkqueue.reports.flow_status import FlowFigures
from django_alkqueue.reports.status import (
    QueueRow,
    RunningRow,
    WorkerRow,
    flow_overview,
    queue_overview,
    running_overview,
    worker_overview,
)

from ._arguments import database_alias, positive_seconds
from ._base import QueueCommand
from ._terminal import json_default, progress_text, table

QUEUE_COLUMNS = (
    gettext_lazy("queue"),
    pgettext_lazy("state", "pending"),
    pgettext_lazy("state", "scheduled"),
    pgettext_lazy("state", "sleeping"),
    pgettext_lazy("state", "waiting"),
    pgettext_lazy("state", "claimed"),
    pgettext_lazy("state", "dead"),
    gettext_lazy("oldest"),
    pgettext_lazy("state", "paused"),
    gettext_lazy("handler"),
)


def queue_table(rows: list[QueueRow]) -> str:
    body = [
        (r.queue, str(r.pending), str(r.scheduled), str(r.sleeping), str(r.waiting),
         str(r.claimed), str(r.dead),
         f"{r.oldest_pending_age:.1f}s" if r.pending else "-", _("yes") if r.paused else _("no"),
         r.handler or "-")
        for r in rows
    ]  # fmt: skip
    return table(tuple(map(str, QUEUE_COLUMNS)), body)


def worker_table(rows: list[WorkerRow]) -> str:
    body = [
        (w.worker_id, w.hostname, str(w.pid), ",".join(w.queues),
         w.last_heartbeat_at.isoformat(timespec="seconds"),
         pgettext("worker", "stale") if w.stale else pgettext("worker", "live"),
         _("leader") if w.is_leader else "",
         str(w.jobs_processed), str(w.jobs_failed))
        for w in rows
    ]  # fmt: skip
    header = (
        _("worker"),
        _("host"),
        _("pid"),
        _("queues"),
        _("last heartbeat"),
        pgettext("worker", "state"),
        _("role"),
        _("done"),
        pgettext("outcome", "failed"),
    )
    return table(header, body)


FLOW_COLUMNS = (
    gettext_lazy("queue"),
    gettext_lazy("limits (from)"),
    gettext_lazy("claimed/concurrency"),
    gettext_lazy("throttled"),
    gettext_lazy("busiest keys"),
)


def flow_table(flows: list[FlowFigures]) -> str:
    """The queues with limits in force: limits and their sources, claimed vs concurrency,
    throttled, and the busiest keys as key running/pending."""
    body = [
        (f.queue,
         ", ".join(f"{name}={value} ({source})" for name, value, source in f.table if value),
         f"{f.claimed}/{f.concurrency if f.concurrency is not None else '-'}",
         str(f.throttled),
         ", ".join(f"{k.key} {k.running}/{k.pending}" for k in f.busiest_keys) or "-")
        for f in flows
    ]  # fmt: skip
    return table(tuple(map(str, FLOW_COLUMNS)), body)


RUNNING_COLUMNS = (
    gettext_lazy("job"),
    gettext_lazy("queue"),
    gettext_lazy("worker"),
    gettext_lazy("progress"),
    gettext_lazy("note"),
    gettext_lazy("reported"),
)


def running_table(rows: list[RunningRow]) -> str:
    """The running jobs that report progress: done/total (percent), the note, and when."""
    body = [
        (str(r.job_id), r.queue, r.worker_id or "-", progress_text(r.progress),
         r.progress.note or "-", r.progress.updated_at.isoformat(timespec="seconds"))
        for r in rows
    ]  # fmt: skip
    return table(tuple(map(str, RUNNING_COLUMNS)), body)


def _flow_json(flow: FlowFigures | None) -> dict[str, Any] | None:
    """A queue's flow figures under "flow" (null without limits); its limits and their
    sources are the queue's own "limits" and "limit_sources"."""
    if flow is None:
        return None
    return {
        "claimed": flow.claimed,
        "concurrency": flow.concurrency,
        "throttled": flow.throttled,
        "busiest_keys": [dataclasses.asdict(k) for k in flow.busiest_keys],
    }


class Command(QueueCommand):
    help = "Show queue depths and the live workers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument("--watch", type=positive_seconds, default=None, metavar="N",
                            help="refresh every N seconds")  # fmt: skip
        parser.add_argument("--database", type=database_alias, default=None)
        parser.add_argument("--show-keys", action="store_true",
                            help="show the busiest keys of sensitive queues too")  # fmt: skip

    def run(self, using: str, **options: Any) -> None:
        try:
            while True:
                self.stdout.write(self.render(using, options["json"], options["show_keys"]))
                if options["watch"] is None:
                    return
                time.sleep(options["watch"])
        except KeyboardInterrupt:
            # Ctrl-C is how --watch ends: a clean exit, not a traceback.
            self.stdout.write("")

    def render(self, using: str, as_json: bool, show_keys: bool = False) -> str:
        now = system_clock()
        queues = queue_overview(using, now)
        flows = flow_overview(using, now, queues)
        if flows and not show_keys:  # a key is often made from the payload (docs/security.md)
            hidden = sensitive_queues(using)
            flows = {q: f.with_keys_masked() if q in hidden else f for q, f in flows.items()}
        workers = worker_overview(using, now)
        running = running_overview(using)
        if as_json:
            data = {
                "queues": [
                    dataclasses.asdict(q) | {"flow": _flow_json(flows.get(q.queue))} for q in queues
                ],
                "workers": [dataclasses.asdict(w) for w in workers],
                "running": [dataclasses.asdict(r) for r in running],
            }
            return json.dumps(data, default=json_default, indent=2)
        text = queue_table(queues)
        if flows:
            text += "\n\n" + _("flow control") + "\n" + flow_table(list(flows.values()))
        if running:
            text += "\n\n" + _("running") + "\n" + running_table(running)
        if not workers:  # no empty table: one line says it
            return text + "\n\n" + _("no worker is registered") + "\n"
        return text + "\n\n" + _("workers") + "\n" + worker_table(workers) + "\n"
