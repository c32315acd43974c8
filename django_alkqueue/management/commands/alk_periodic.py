"""`manage.py alk_periodic`: the periodic schedules with their last and next ticks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import CommandParser
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from django_alkqueue.clock import system_clock
from django_alkqueue.models import PeriodicTick
from django_alkqueue.periodic import never_fires, next_tick, schedules
from django_alkqueue.privacy import sensitive_queues

from ._arguments import database_alias
from ._base import QueueCommand


class Command(QueueCommand):
    help = "List the periodic schedules with their next run times."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", type=database_alias, default=None)
        parser.add_argument(
            "--show-payloads",
            action="store_true",
            help="show the payloads of sensitive queues' schedules too",
        )

    def run(self, using: str, **options: Any) -> None:
        now = system_clock()
        hidden = frozenset() if options["show_payloads"] else sensitive_queues(using)
        ticks = PeriodicTick.objects.using(using).values_list("name", "last_tick", "paused")
        last = {name: (tick, paused) for name, tick, paused in ticks}
        rows = [(_("name"), _("cron"), _("queue"), _("target"), _("last tick"), _("next run"))]
        for s in schedules():
            previous, paused = last.get(s.name, (None, False))
            rows.append((
                s.name, s.cron, s.queue or _("(task's)"), s.describe(s.target_queue in hidden),
                previous.isoformat(timespec="seconds") if previous else "-",
                pgettext("state", "paused") if paused else _next_run(s.cron, now),
            ))  # fmt: skip
        if len(rows) == 1:
            self.stdout.write(_("no periodic schedules (ALKQUEUE['PERIODIC'] is empty)"))
            return
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def _next_run(cron: str, now: datetime) -> str:
    """The next tick, or "never" for a cron with no date (the system check reports it)."""
    if never_fires(cron):
        return _("never")
    return next_tick(cron, now).isoformat(timespec="seconds")
