"""`manage.py alk_jobs`: the queues and their jobs from a shell, where the admin is not
(Kubernetes, SSH): list, show, retry (requeue), cancel, purge, pause, resume, limits and
signal.
Parse the arguments, then hand over: job_filters.py reads, job_actions.py changes and writes
the admin's audit log. Exit 0 done, 1 nothing matched (or nothing changed), 2 bad usage;
3 and 4 as every alk_* command (docs/operations.md, "alk_jobs")."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, NoReturn

from django.core.management.base import CommandParser
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from django_alkqueue import job_actions, operations
from django_alkqueue import limits as flow
from django_alkqueue.audit import Actor, command_actor
from django_alkqueue.clock import system_clock
from django_alkqueue.exceptions import InvalidOption
from django_alkqueue.job_filters import JobFilter, fair_key_of, listed, masked_job
from django_alkqueue.models import Consumer, DeadLetter, QueueMessage
from django_alkqueue.privacy import masked_key, sensitive_queues

from . import _job_output as output
from ._base import QueueCommand
from ._job_arguments import add_subcommands

#: The exit statuses of its own (3 and 4 are every command's: _base.py).
NOTHING_MATCHED = 1
USAGE = 2
#: The name audit entries give the command.
COMMAND = "alk_jobs"


class Command(QueueCommand):
    help = (
        "List, show, retry (requeue), cancel and purge jobs, send them signals, pause and "
        "resume queues, read and set their limits. Exit 0 done, 1 nothing matched, 2 bad "
        "usage, 3 database unreachable, 4 migrations unapplied."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_subcommands(parser)

    def run(self, using: str, **options: Any) -> None:
        self.using = using
        self.as_json = options["json"]
        handlers = {
            "list": self.do_list, "show": self.do_show, "retry": self.do_retry,
            "requeue": self.do_retry, "cancel": self.do_cancel, "purge": self.do_purge,
            "pause": self.do_pause, "resume": self.do_resume, "limits": self.do_limits,
            "signal": self.do_signal,
        }  # fmt: skip
        handlers[options["subcommand"]](options)

    # -- reads ------------------------------------------------------------------------------

    def do_list(self, options: dict[str, Any]) -> None:
        now = system_clock()
        found = self.job_filter(options, options["state"])
        jobs = listed(self.using, found, now, options["limit"])
        hidden = self.hidden(options)
        jobs = [job.masked() if job.queue in hidden else job for job in jobs]
        if self.as_json:
            self.stdout.write(output.list_json(jobs))
        elif jobs:
            self.stdout.write(output.list_table(jobs, now))
        if not jobs:
            self.nothing(_("no job matches"))

    def do_show(self, options: dict[str, Any]) -> None:
        job = operations.get_job(self.using, options["id"], system_clock())
        if job is None:
            self.nothing(
                _("no job %(id)d: not live, not a dead letter, not kept") % {"id": options["id"]}
            )
        fair_key = fair_key_of(self.using, job.id)
        if job.queue in self.hidden(options):
            job, fair_key = masked_job(job), masked_key(fair_key)
        group = (
            DeadLetter.objects.using(self.using)
            .filter(job_id=job.id)
            .values_list("error_fingerprint", flat=True)
            .first()
        )
        self.stdout.write(
            output.job_json(job, group, fair_key)
            if self.as_json
            else output.job_text(job, group, fair_key)
        )

    def do_limits(self, options: dict[str, Any]) -> None:
        queues = named_queues(options)
        changes = {name: options[name] for name in flow.NAMES if name in options}
        if not changes and not options["reset"]:
            names = queues or list(
                Consumer.objects.using(self.using).order_by("queue").values_list("queue", flat=True)
            )
            if not names:
                self.nothing(_("no queue has a Consumer row yet"))
            found = {name: flow.limits_in_force(name, using=self.using) for name in names}
            self.stdout.write(
                output.limits_json(found) if self.as_json else output.limits_table(found)
            )
            return
        if not queues:
            self.usage(_("name the queues whose limits to change"))
        if changes and options["reset"]:
            self.usage(_("--reset drops every override: give it alone"))
        actor = self.actor()
        if options["reset"]:
            done = job_actions.reset_limits(self.using, queues, actor)
        else:
            done = job_actions.set_limits(self.using, queues, changes, actor)
        self.without_row(queues, done)
        if not done:
            raise SystemExit(NOTHING_MATCHED)
        self.stdout.write(output.limits_json(done) if self.as_json else output.limits_table(done))

    # -- changes ----------------------------------------------------------------------------

    def do_retry(self, options: dict[str, Any]) -> None:
        if options["from_step"] is not None:
            self.do_requeue_from_step(options)
            return
        found = self.job_filter(options, ["dead"], ids=options["ids"])
        self.require_target(dataclasses.replace(found, states=()))  # "dead" goes without saying
        done = job_actions.requeue(
            self.using, found, self.actor(), system_clock(), options["limit"]
        )
        if self.as_json:
            self.stdout.write(output.as_json(dataclasses.asdict(done)))
        else:
            for line in output.requeued_lines(done):
                self.stdout.write(line)
        if not (done.requeued or done.kept or done.gone):
            self.nothing(_("no dead letter matches"))
        if not done.requeued:
            raise SystemExit(NOTHING_MATCHED)

    def do_requeue_from_step(self, options: dict[str, Any]) -> None:
        """retry ID --from-step NAME: one dead letter, by its job's id, no filter."""
        ids, step = options["ids"], options["from_step"]
        if len(ids) != 1 or options["limit"] is not None or self.job_filter(options, ()).any():
            self.usage(_("--from-step requeues one dead letter: give its job id alone"))
        job_id = ids[0]
        try:
            done = job_actions.requeue_from_step(
                self.using, job_id, step, self.actor(), system_clock()
            )
        except InvalidOption:
            self.nothing(
                _("job %(id)d has no recorded step %(step)s") % {"id": job_id, "step": repr(step)}
            )
        if self.as_json:
            self.stdout.write(output.as_json(output.from_step_dict(done)))
        else:
            self.stdout.write(output.from_step_text(done, step))
        if not done.requeued:
            raise SystemExit(NOTHING_MATCHED)

    def do_cancel(self, options: dict[str, Any]) -> None:
        found = self.job_filter(options, options["state"], ids=options["ids"])
        self.require_target(found)
        cancelled = job_actions.cancel(
            self.using, found, self.actor(), system_clock(), options["limit"]
        )
        if self.as_json:
            self.stdout.write(output.as_json({"cancelled": cancelled}))
        if not cancelled:
            self.nothing(_("no live job matches"))
        if not self.as_json:
            text = ngettext(
                "cancelled %(n)d job: %(ids)s", "cancelled %(n)d jobs: %(ids)s", len(cancelled)
            )
            self.stdout.write(text % {"n": len(cancelled), "ids": output.ids_text(cancelled)})

    def do_signal(self, options: dict[str, Any]) -> None:
        job_id, name = options["id"], options["name"]
        sent = job_actions.signal(
            self.using, job_id, name, options["payload"], self.actor(), system_clock()
        )
        if self.as_json:
            self.stdout.write(output.as_json({"signalled": sent}))
        if not sent:
            self.nothing(
                _("job %(id)d is not live, or has a signal %(name)s already")
                % {"id": job_id, "name": repr(name)}
            )
        if not self.as_json:
            self.stdout.write(
                _("sent signal %(name)s to job %(id)d") % {"id": job_id, "name": repr(name)}
            )

    def do_purge(self, options: dict[str, Any]) -> None:
        queues, state = self.required_queues(options), options["state"]
        now = system_clock()
        counts = {name: purge_count(self.using, name, state, now) for name in queues}
        total = sum(counts.values())
        if not total:
            if self.as_json:
                self.stdout.write(output.as_json({"purged": dict.fromkeys(queues, 0)}))
            self.nothing(
                _("nothing to purge: no %(state)s job in %(queues)s")
                % {"state": state, "queues": ", ".join(queues)}
            )
        if not options["yes"]:
            self.confirm_purge(counts, state)
        actor = self.actor()
        purged = {name: job_actions.purge(self.using, name, state, actor, now) for name in queues}
        if self.as_json:
            self.stdout.write(output.as_json({"purged": purged}))
            return
        for name, n in purged.items():
            text = ngettext(
                "purged %(n)d %(state)s job of queue %(queue)s",
                "purged %(n)d %(state)s jobs of queue %(queue)s",
                n,
            )
            self.stdout.write(text % {"n": n, "state": state, "queue": name})

    def confirm_purge(self, counts: dict[str, int], state: str) -> None:
        """Ask on a terminal; refuse without one (a script says --yes)."""
        if not sys.stdin.isatty():
            self.usage(_("purge asks for confirmation, and stdin is not a terminal: give --yes"))
        what = ", ".join(f"{n} {state} ({name})" for name, n in counts.items() if n)
        self.stdout.write(
            _("Purge %(what)s? They cannot be brought back. [y/N] ") % {"what": what}, ending=""
        )
        self.stdout.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            self.nothing(_("nothing purged"))

    def do_pause(self, options: dict[str, Any]) -> None:
        self.set_paused(self.required_queues(options), job_actions.pause, "paused")

    def do_resume(self, options: dict[str, Any]) -> None:
        self.set_paused(self.required_queues(options), job_actions.resume, "resumed")

    def set_paused(self, queues: list[str], change: Any, key: str) -> None:
        done = change(self.using, queues, self.actor())
        if self.as_json:
            self.stdout.write(output.as_json({key: done}))
        self.without_row(queues, done)
        if not done:
            raise SystemExit(NOTHING_MATCHED)
        if self.as_json:
            return
        if key == "paused":
            text = ngettext(
                "paused %(queues)s: workers stop claiming from it within one poll interval",
                "paused %(queues)s: workers stop claiming from them within one poll interval",
                len(done),
            )
        else:
            text = ngettext(
                "resumed %(queues)s: workers claim from it again within one poll interval",
                "resumed %(queues)s: workers claim from them again within one poll interval",
                len(done),
            )
        self.stdout.write(text % {"queues": ", ".join(done)})

    # -- helpers ----------------------------------------------------------------------------

    def job_filter(
        self, options: dict[str, Any], states: Sequence[str], ids: Sequence[int] = ()
    ) -> JobFilter:
        return JobFilter(
            ids=tuple(ids),
            queues=tuple(options["queue"]),
            states=tuple(states),
            error=options["error"],
            older_than=options["older_than"],
            key=options["key"],
            key_hidden=self.hidden(options),
        )

    def hidden(self, options: dict[str, Any]) -> frozenset[str]:
        """The sensitive queues, unless --show-payload: their payloads and keys are masked,
        and --key finds none of their rows (privacy.py)."""
        return frozenset() if options.get("show_payload") else sensitive_queues(self.using)

    def actor(self) -> Actor | None:
        return command_actor(COMMAND)

    def required_queues(self, options: dict[str, Any]) -> list[str]:
        queues = named_queues(options)
        if not queues:
            self.usage(_("name the queues: after the subcommand, or with --queue"))
        return queues

    def require_target(self, found: JobFilter) -> None:
        if not found.any():
            self.usage(_("name the jobs: give ids, or a filter (--queue, --error, ...)"))

    def without_row(self, queues: Sequence[str], done: Collection[str]) -> None:
        missing = [name for name in dict.fromkeys(queues) if name not in done]
        if missing:
            text = _(
                "no Consumer row for %(queues)s: a worker writes it when it first serves the queue"
            )
            self.stderr.write(text % {"queues": ", ".join(missing)})

    def nothing(self, message: str) -> NoReturn:
        """Nothing matched, so nothing changed: say so, exit 1."""
        if not self.as_json:
            self.stdout.write(message)
        raise SystemExit(NOTHING_MATCHED)

    def usage(self, message: str) -> NoReturn:
        self.stderr.write(message)
        raise SystemExit(USAGE)


def named_queues(options: dict[str, Any]) -> list[str]:
    """The queues named after the subcommand and with --queue, each once, in order."""
    return list(dict.fromkeys([*options.get("queue_names", []), *options["queue"]]))


def purge_count(using: str, queue: str, state: str, now: datetime) -> int:
    """How many rows a purge of the queue's `state` would delete (for the question)."""
    if state == "dead":
        return DeadLetter.objects.using(using).filter(queue=queue).count()
    return QueueMessage.objects.using(using).filter(queue=queue).in_state(state, now).count()
