"""The audit log of the operator's actions: one entry in Django's admin log (LogEntry) per run
of an action, whether an admin user ran it or `manage.py alk_jobs` did, and the requeue
entries read back to say which dead letter a live job came from.

An entry reads "verb: count noun; ids 1, 2", then what those rows became (" -> jobs 14,
15"), any detail, and for a command who ran it (". By root@web-1 via alk_jobs"). Always in
English, whatever the language of the page or the terminal: it is a record, and it is parsed
here. A command's entries name the user row COMMAND_USER (created on first use, inactive,
without a password), since a LogEntry needs a user; the OS user and host are in the message
(docs/operations.md, "alk_jobs"). The admin's models are looked up, not imported, so that the
module loads wherever the app does; without django.contrib.admin nothing is written.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import socket
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db.models import Model
from django.utils import translation

from .models import DeadLetter
from .operations import RequeueRun

#: LogEntry's action flags (django.contrib.admin.models, which cannot be imported where the
#: admin is not installed).
CHANGE = 2
DELETION = 3
#: The user row a command's entries name.
COMMAND_USER = "alk_jobs"
#: What the requeue entries' verb is, and what comes between the dead letter ids and the
#: job ids they became.
REQUEUE = "requeue"
_BECAME = " -> jobs "
#: What comes before who ran a command.
_BY = ". By "


@dataclasses.dataclass(frozen=True)
class Actor:
    """Who ran an action: the user row its entries name, and for a command, the OS user, the
    host and the command ("root@web-1 via alk_jobs")."""

    user_id: int
    by: str = ""


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a live job came from: the dead letter, when and by whom it was requeued."""

    dead_letter_id: int
    at: datetime
    by: str


def admin_log_kept() -> bool:
    """Whether this project has an admin log to write to."""
    return apps.is_installed("django.contrib.admin")


def command_actor(command: str) -> Actor | None:
    """The Actor of a command run here: the COMMAND_USER row (created on first use) and the
    OS user at this host. None where there is no admin log."""
    if not admin_log_kept():
        return None
    users = get_user_model()
    lookup: dict[str, Any] = {users.USERNAME_FIELD: COMMAND_USER}
    user, created = users._default_manager.get_or_create(**lookup)
    if created:  # nobody logs in as it
        user.set_unusable_password()
        user.is_active = False
        user.save()
    return Actor(user.pk, f"{os_user()}@{socket.gethostname()} via {command}")


def os_user() -> str:
    """The login name of this process's user; its uid where the system has no name for it
    (a container run with an arbitrary uid)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def record(
    actor: Actor,
    model: type[Model],
    verb: str,
    ids: Sequence[Any],
    flag: int = CHANGE,
    detail: str = "",
    *,
    count: int | None = None,
    result: str = "",
) -> Any:
    """One admin log entry for one run: "verb: count noun; ids 1, 2", then what those rows
    became (" -> jobs 14, 15"), any detail and who ran a command. The count is len(ids)
    unless given: a run that changed nothing logs 0 with the ids it was asked for; a run over
    a filter (a purge) gives its count and no ids. Returns the LogEntry, None where there is
    no admin log."""
    if not admin_log_kept():
        return None
    n = len(ids) if count is None else count
    with translation.override(None):  # the models' verbose names untranslated
        noun = str(model._meta.verbose_name if n == 1 else model._meta.verbose_name_plural)
    summary = f"{verb}: {n} {noun}"
    message = summary
    if ids or not n:
        message += f"; ids {', '.join(str(i) for i in ids) or 'none'}"
    message += f" -> {result}" if result else ""
    message += f". {detail}" if detail else ""
    message += f"{_BY}{actor.by}" if actor.by else ""
    # Looked up, not imported: this module loads where the admin and its content types are
    # not installed (alk_jobs runs there too, and writes nothing).
    content_types: Any = apps.get_model("contenttypes", "ContentType")
    return apps.get_model("admin", "LogEntry").objects.create(
        user_id=actor.user_id or 0,
        content_type_id=content_types.objects.get_for_model(model).pk,
        object_id=str(ids[0]) if len(ids) == 1 else None,
        object_repr=summary[:200],
        action_flag=flag,
        change_message=message,
    )


# -- requeues ------------------------------------------------------------------------------


def record_requeue(actor: Actor, run: RequeueRun, detail: str = "") -> Any:
    """One entry under DeadLetter, even when nothing could be requeued (count 0, with the ids
    asked for): the audit shows every attempt. `detail` is added to what it says."""
    others = "; ".join(part for part in (detail, _others(run)) if part)
    if not run.requeued:
        return record(actor, DeadLetter, REQUEUE, run.asked, count=0, detail=others)
    dead_ids = [dead for dead, _ in run.requeued]
    jobs = ", ".join(str(job) for _, job in run.requeued)
    return record(actor, DeadLetter, REQUEUE, dead_ids, result=f"jobs {jobs}", detail=others)


def _others(run: RequeueRun) -> str:
    parts = []
    if run.kept:
        held = ", ".join(f"{dead} (job {holder})" for dead, holder in run.kept)
        parts.append(f"kept, a live job holds the unique key: ids {held}")
    if run.gone:
        parts.append(f"already gone: ids {', '.join(str(dead) for dead in run.gone)}")
    return "; ".join(parts)


def requeued_from(job_id: int) -> Origin | None:
    """The latest requeue that made `job_id` live again, or None (never requeued, or not by
    an operator). One query: the content type narrows it to the dead letters' entries
    through the log's content_type index, the pattern picks the runs naming this job."""
    if not admin_log_kept():
        return None
    pattern = rf"^{REQUEUE}: .*{_BECAME}([0-9]+, )*{int(job_id)}([^0-9]|$)"
    entry = (
        apps.get_model("admin", "LogEntry")
        .objects.filter(
            content_type__app_label=DeadLetter._meta.app_label,
            content_type__model=DeadLetter._meta.model_name,
            change_message__regex=pattern,
        )
        .select_related("user")
        .order_by("-action_time", "-id")
        .first()
    )
    if entry is None:
        return None
    message = entry.change_message
    by = message.rsplit(_BY, 1)[1] if _BY in message else entry.user.get_username()
    return Origin(_dead_letter_of(message, job_id), entry.action_time, by)


def _dead_letter_of(message: str, job_id: int) -> int:
    """In "...; ids 3, 4 -> jobs 14, 15. detail", the dead letter id paired with job_id."""
    head, _, tail = message.partition(_BECAME)
    dead_ids = head.rsplit("; ids ", 1)[1].split(", ")
    jobs = tail.split(".", 1)[0].split(", ")
    return int(dead_ids[jobs.index(str(job_id))])
