"""`manage.py alk_worker`: parse the options, then hand over to the worker (docs/worker.md)."""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils.translation import gettext as _

from django_alkqueue import defaults
from django_alkqueue.reports.worker_report import default_job_fields
from django_alkqueue.validation import MAX_CLAIM
from django_alkqueue.worker.reload import run_with_reload
from django_alkqueue.worker.runner import Worker, WorkerOptions
from django_alkqueue.worker.supervisor import Supervisor

from ._arguments import (
    database_alias,
    non_negative_int,
    positive_int,
    positive_int_up_to,
    positive_seconds,
    queue_name,
    seconds,
)  # fmt: skip
from ._base import QueueCommand


def freeze_startup_heap() -> None:
    """Leave everything made before the first job (Django, the apps, the URLconf, the
    consumers) out of the cyclic garbage collector's passes. A worker allocates a few objects
    per job, so the collector runs hundreds of times a second, and each of its older
    generations' passes walked the whole start-up heap: a tenth of a draining worker's
    Python time (docs/worker.md). The garbage of start-up is collected first, not frozen."""
    gc.collect()
    gc.freeze()


def ensure_console_handler(logger: logging.Logger) -> None:
    """Give the worker's logger a console handler when the project's LOGGING leaves it (and
    its ancestors) without one: without it, Python prints only warnings, so a worker started
    in a project with no LOGGING setting would say nothing of what it serves or runs."""
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)


class Command(QueueCommand):
    help = "Run queue workers: claim jobs and run their consumers until stopped."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            type=queue_name,
            default=[],
            dest="queues",
            help="queue to serve (repeatable; default: every consumer's)",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int_up_to(defaults.WORKER_CONCURRENCY_MAX),
            default=defaults.WORKER_CONCURRENCY,
            help="handler threads (with --pool process: children) per process "
            f"(default {defaults.WORKER_CONCURRENCY}, at most {defaults.WORKER_CONCURRENCY_MAX})",
        )
        parser.add_argument(
            "--processes",
            type=positive_int_up_to(defaults.WORKER_PROCESSES_MAX),
            default=defaults.WORKER_PROCESSES,
            help=f"worker processes, supervised (default {defaults.WORKER_PROCESSES}, "
            f"at most {defaults.WORKER_PROCESSES_MAX})",
        )
        parser.add_argument(
            "--batch",
            type=positive_int_up_to(MAX_CLAIM),
            default=None,
            help=f"claim size (default: the free capacity; at most {MAX_CLAIM}, a claim's most)",
        )
        parser.add_argument(
            "--poll-interval",
            type=positive_seconds,
            default=defaults.WORKER_POLL_INTERVAL,
            help=f"seconds between polls when idle (default {defaults.WORKER_POLL_INTERVAL})",
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=seconds,
            default=defaults.WORKER_SHUTDOWN_TIMEOUT,
            help="seconds to let in-flight jobs finish on SIGTERM "
            f"(default {defaults.WORKER_SHUTDOWN_TIMEOUT:g})",
        )
        parser.add_argument("--worker-id", default=None, help="default: host:pid")
        parser.add_argument(
            "--burst", action="store_true", help="exit once no job is due and nothing is in flight"
        )
        parser.add_argument(
            "--max-jobs",
            type=positive_int,
            default=None,
            help="exit after finishing this many jobs",
        )
        parser.add_argument(
            "--max-stuck",
            type=non_negative_int,
            default=defaults.WORKER_MAX_STUCK,
            help="handler threads stuck past their time limit tolerated; one more and the "
            "worker exits with status 75 for its supervisor to restart it "
            f"(default {defaults.WORKER_MAX_STUCK})",
        )
        parser.add_argument(
            "--pool",
            choices=("thread", "process"),
            default=defaults.WORKER_POOL,
            help="run handlers in threads, or in child processes that a time limit or a cancel "
            f"can stop (default {defaults.WORKER_POOL})",
        )
        parser.add_argument(
            "--kill-grace",
            type=seconds,
            default=defaults.WORKER_KILL_GRACE,
            help="process pool: seconds between a child's SIGTERM and its SIGKILL, and a "
            f"cancelled handler's time to return (default {defaults.WORKER_KILL_GRACE:g})",
        )
        parser.add_argument(
            "--max-jobs-per-child",
            type=positive_int,
            default=None,
            help="process pool: replace a child after this many handler calls (default: never)",
        )
        parser.add_argument(
            "--takeover",
            action="store_true",
            help="take queues whose Consumer row names another handler",
        )
        parser.add_argument("--database", type=database_alias, default=None,
                            help="database alias")  # fmt: skip
        parser.add_argument(
            "--reload",
            action="store_true",
            help="development: restart the worker when a Python file changes",
        )
        parser.add_argument(
            "--health-file",
            default=None,
            metavar="PATH",
            help="touch this file on every heartbeat, for liveness probes that read its age",
        )
        # The --processes supervisor's pipe to each child it starts (worker/job_notices.py).
        parser.add_argument("--notices-fd", type=non_negative_int, default=None,
                            help=argparse.SUPPRESS)  # fmt: skip

    def run(self, using: str, **options: Any) -> None:
        if options["reload"]:
            run_with_reload(sys.argv)
            return
        # -v 0: warnings only; -v 1: start-up, a summary every 10 s, a line per job that did
        # not succeed; -v 2 and up: debug, with a line per success (reports/worker_report.py).
        levels = {0: logging.WARNING, 1: logging.INFO}
        logger = logging.getLogger("django_alkqueue")
        logger.setLevel(levels.get(options["verbosity"], logging.DEBUG))
        ensure_console_handler(logger)
        default_job_fields(logger)
        health_file = options["health_file"]
        if health_file and not Path(health_file).resolve().parent.is_dir():
            text = _("--health-file: the directory of %(path)r does not exist")
            raise CommandError(text % {"path": health_file})
        worker_options = WorkerOptions(
            queues=tuple(options["queues"]),
            concurrency=options["concurrency"],
            batch=options["batch"],
            poll_interval=options["poll_interval"],
            shutdown_timeout=options["shutdown_timeout"],
            worker_id=options["worker_id"],
            burst=options["burst"],
            max_jobs=options["max_jobs"],
            takeover=options["takeover"],
            using=options["database"],
            health_file=options["health_file"],
            max_stuck=options["max_stuck"],
            pool=options["pool"],
            kill_grace=options["kill_grace"],
            max_jobs_per_child=options["max_jobs_per_child"],
            notices_fd=options["notices_fd"],
        )
        if options["processes"] > 1:
            code = Supervisor(worker_options, options["processes"], options["verbosity"]).run()
            if code:
                raise SystemExit(code)
        else:
            # This process is the worker's own; the supervisor above only waits on its children.
            freeze_startup_heap()
            code = Worker(worker_options, stdout=self.stdout).run()
            # A loop died (EXIT_SOFTWARE) or threads were stuck (EXIT_STUCK): the supervisor
            # or systemd restarts us.
            if code:
                raise SystemExit(code)
