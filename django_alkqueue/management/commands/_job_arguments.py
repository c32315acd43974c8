"""The arguments of `manage.py alk_jobs`: its subcommands and their options, each checked
as it is parsed (_arguments.py), so a bad one is refused with exit status 2."""

from __future__ import annotations

import argparse

from django.core.management.base import CommandParser

from django_alkqueue import limits as flow
from django_alkqueue.defaults import JOBS_LISTED
from django_alkqueue.job_filters import STATES
from django_alkqueue.jobs import LIVE_STATES

from ._arguments import (
    database_alias,
    duration,
    job_id,
    json_payload,
    limit,
    positive_int,
    queue_name,
    signal_name,
)

#: What `purge` may delete: a claimed job is cancelled, so that its worker hears of it.
PURGED_STATES = ("pending", "scheduled", "waiting", "dead")


def add_subcommands(parser: CommandParser) -> None:
    """list, show, retry (requeue), cancel, purge, pause, resume, limits, signal."""
    common, filters = _common_options(), _filter_options()
    commands = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    _add_list(
        commands.add_parser(
            "list", parents=[common, filters], help="the newest jobs that match, live or dead"
        )
    )
    _add_show(commands.add_parser("show", parents=[common], help="one job, in full"))
    retry = commands.add_parser(
        "retry",
        aliases=["requeue"],
        parents=[common, filters],
        help="requeue dead letters: by id, queue or error group; one from a step",
    )
    _ids_and_limit(retry, "dead letters")
    retry.add_argument(
        "--from-step",
        type=signal_name,
        default=None,
        metavar="NAME",
        help="requeue one dead letter (by id) from its durable step NAME: that step and "
        "every step recorded after it are deleted",
    )
    cancel = commands.add_parser(
        "cancel",
        parents=[common, filters],
        help="cancel live jobs, in any state: by id or filter",
    )
    cancel.add_argument("--state", action="append", choices=LIVE_STATES, default=[])
    _ids_and_limit(cancel, "jobs")
    _add_purge(
        commands.add_parser(
            "purge", parents=[common], help="delete a queue's pending (or --state) jobs"
        )
    )
    for name, text in (
        ("pause", "workers stop claiming from the queues"),
        ("resume", "workers claim from the queues again"),
    ):
        _queues(commands.add_parser(name, parents=[common], help=text))
    _add_limits(
        commands.add_parser("limits", parents=[common], help="read the queues' limits, or set them")
    )
    _add_signal(commands.add_parser("signal", parents=[common], help="send a signal to a live job"))


def _common_options() -> CommandParser:
    """What every subcommand takes; -v and --traceback also after the subcommand's name."""
    common = CommandParser(add_help=False)
    common.add_argument("--database", type=database_alias, default=None, help="database alias")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument(
        "-v", "--verbosity", type=int, choices=[0, 1, 2, 3], default=argparse.SUPPRESS
    )
    common.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS)
    return common


def _filter_options() -> CommandParser:
    """What selects jobs: list, retry and cancel."""
    filters = CommandParser(add_help=False)
    filters.add_argument("--queue", action="append", type=queue_name, default=[], help="repeatable")
    filters.add_argument(
        "--error",
        default=None,
        metavar="TEXT",
        help="an error group's fingerprint, or text of the last error",
    )
    filters.add_argument(
        "--older-than",
        type=duration,
        default=None,
        metavar="SECONDS",
        help="enqueued (a dead letter: died) more than this long ago",
    )
    filters.add_argument("--key", default=None, help="a unique or concurrency key")
    filters.add_argument(
        "--show-payload",
        action="store_true",
        help="show sensitive queues' payloads and keys; let --key find them",
    )
    return filters


def _add_list(parser: CommandParser) -> None:
    parser.add_argument(
        "--state",
        action="append",
        choices=STATES,
        default=[],
        help="repeatable; default: every state, dead letters included",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=JOBS_LISTED,
        help=f"the most jobs listed (default {JOBS_LISTED})",
    )


def _add_show(parser: CommandParser) -> None:
    parser.add_argument("id", type=job_id, metavar="ID")
    parser.add_argument(
        "--show-payload",
        action="store_true",
        help="show the payload and keys of a sensitive queue's job",
    )


def _queues(parser: CommandParser) -> None:
    """The queues a subcommand acts on: named after it, or with --queue (repeatable)."""
    parser.add_argument("queue_names", nargs="*", type=queue_name, metavar="QUEUE")
    parser.add_argument("--queue", action="append", type=queue_name, default=[])


def _add_purge(parser: CommandParser) -> None:
    _queues(parser)
    parser.add_argument("--state", choices=PURGED_STATES, default="pending")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def _add_limits(parser: CommandParser) -> None:
    _queues(parser)
    for name in flow.NAMES:
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=limit(name),
            dest=name,
            default=argparse.SUPPRESS,
            metavar="VALUE",
            help="override it; none: no limit",
        )
    parser.add_argument(
        "--reset", action="store_true", help="drop the overrides: the code's limits apply again"
    )


def _add_signal(parser: CommandParser) -> None:
    parser.add_argument("id", type=job_id, metavar="JOB_ID")
    parser.add_argument("name", type=signal_name, metavar="NAME", help="the signal's name")
    parser.add_argument(
        "--payload",
        type=json_payload,
        default=None,
        metavar="JSON",
        help="what job.wait_for returns (default null)",
    )


def _ids_and_limit(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("ids", nargs="*", type=job_id, metavar="ID", help="job ids")
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=None,
        help=f"the most {what} changed (default: every one that matches)",
    )
