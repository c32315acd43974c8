"""`manage.py alk_health`: parse the options, run the checks (reports/health.py), print one
line per problem and exit with the status of the most fundamental one (docs/operations.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import translation
from django.utils.translation import gettext as _

from django_alkqueue import defaults
from django_alkqueue.clock import system_clock
from django_alkqueue.conf import get_settings
from django_alkqueue.reports import health

from ._arguments import database_alias, positive_seconds, seconds


class Command(BaseCommand):
    help = (
        "Check the queue's health for probes and monitors: exit 0 when healthy, else "
        "3 database unreachable, 4 unapplied migrations, 5 no live leader, "
        "6 a queue's oldest pending job older than --max-age, 7 a stale worker, "
        "8 pending jobs of a queue no live worker serves."
    )
    requires_system_checks: list[str] = []  # a probe runs often: the checks are deploy-time
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--max-age",
            type=positive_seconds,
            default=None,
            metavar="SECONDS",
            help="unhealthy when a queue's oldest pending job has waited longer than this",
        )
        parser.add_argument(
            "--queue",
            action="append",
            default=[],
            dest="queues",
            help="the queue --max-age applies to (repeatable; default: every queue)",
        )
        parser.add_argument(
            "--worker",
            action="append",
            default=[],
            dest="workers",
            metavar="ID",
            help="unhealthy when this worker's heartbeat is stale or missing (repeatable)",
        )
        parser.add_argument(
            "--this-host",
            action="store_true",
            help="unhealthy when this host has no live worker, or a running one is stale",
        )
        parser.add_argument(
            "--orphaned-after",
            type=seconds,
            default=defaults.HEALTH_ORPHANED_AFTER,
            metavar="SECONDS",
            help="unhealthy when a pending job has waited longer than this in a queue no live "
            f"worker serves (default {defaults.HEALTH_ORPHANED_AFTER:g})",
        )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.add_argument("--database", type=database_alias, default=None,
                            help="database alias")  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        if options["queues"] and options["max_age"] is None:
            raise CommandError(_("--queue selects the queues of --max-age: give --max-age too"))
        using = options["database"] or get_settings().DATABASE
        checks = health.HealthOptions(
            stale_after=get_settings().WORKER_STALE_AFTER,
            max_age=options["max_age"],
            queues=tuple(options["queues"]),
            workers=tuple(options["workers"]),
            this_host=options["this_host"],
            orphaned_after=options["orphaned_after"],
        )
        # --json is for machines: English whatever LANGUAGE_CODE, like the logs.
        with translation.override(None) if options["json"] else contextlib.nullcontext():
            problems = health.run_checks(using, system_clock(), checks)
            code = health.exit_status(problems)
            self.stdout.write(render(problems, code, options["json"]))
        if code:
            raise SystemExit(code)


def render(problems: list[health.Problem], code: int, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            {
                "healthy": not problems,
                "exit_status": code,
                "problems": [dataclasses.asdict(p) for p in problems],
            }
        )
    if not problems:
        return _("healthy")
    return "\n".join(p.message for p in problems)
