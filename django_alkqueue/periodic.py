"""Periodic (cron) jobs from ALKQUEUE["PERIODIC"], enqueued by the leader's scheduler.

Each tick is enqueued exactly once: the schedule's PeriodicTick row is advanced by a
conditional UPDATE in the same transaction as the enqueue, so of two schedulers only one
advances it, and a tick whose job already ran and left the table is never enqueued again.
Ticks missed while no worker ran collapse into the most recent one (no burst); a schedule
seen for the first time starts with its most recent tick, like any missed tick.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from django.conf import settings
from django.db import DatabaseError, InterfaceError, transaction
from django.utils.module_loading import import_string

from . import validation
from .clock import Clock
from .conf import get_settings
from .models import PeriodicTick
from .queues import queue

logger = logging.getLogger("django_alkqueue")

#: PeriodicTick.name holds at most this many characters.
MAX_NAME_LENGTH = 200


@dataclasses.dataclass(frozen=True)
class Schedule:
    name: str
    cron: str
    #: None: the task's own queue_name, or "default" for a payload job.
    queue: str | None
    task: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    payload: Any = None

    def describe(self) -> str:
        return f"task {self.task}" if self.task else f"payload {self.payload!r}"


def schedules() -> list[Schedule]:
    """The PERIODIC entries as Schedules (validated by the system checks, see checks.py)."""
    return [
        Schedule(
            name=name,
            cron=entry["cron"],
            queue=entry.get("queue"),
            task=entry.get("task"),
            args=tuple(entry.get("args", ())),
            kwargs=dict(entry.get("kwargs", {})),
            payload=entry.get("payload"),
        )
        for name, entry in sorted(get_settings().PERIODIC.items())
    ]


def entry_errors(name: str, entry: Any) -> list[str]:
    """What is wrong with one PERIODIC entry (empty when it is fine)."""
    if not isinstance(entry, dict) or "cron" not in entry:
        return [f"periodic entry {name!r} needs a 'cron' expression"]
    errors = []
    if not croniter.is_valid(str(entry["cron"])):
        errors.append(f"periodic entry {name!r} has an invalid cron {entry['cron']!r}")
    try:
        validation.queue_name(entry.get("queue", "default"))
    except ValueError as exc:
        errors.append(f"periodic entry {name!r}: {exc}")
    if len(name) > MAX_NAME_LENGTH:
        errors.append(f"periodic entry name {name[:40]!r}... is over {MAX_NAME_LENGTH} chars")
    if entry.get("task"):
        errors.extend(_task_errors(name, entry))
    elif "payload" not in entry:
        errors.append(f"periodic entry {name!r} needs a 'task' or a 'payload'")
    return errors


def _task_errors(name: str, entry: dict[str, Any]) -> list[str]:
    try:
        task = import_string(entry["task"])
    except ImportError:
        return [f"periodic entry {name!r} names an unknown task {entry['task']!r}"]
    if not (hasattr(task, "enqueue") and hasattr(task, "using")):
        return [f"periodic entry {name!r}: {entry['task']!r} is not a @task"]
    if entry.get("queue"):
        try:  # the task's backend decides which queues it accepts
            task.using(queue_name=entry["queue"])
        except Exception as exc:
            return [f"periodic entry {name!r}: {exc}"]
    return []


def zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE or "UTC")


def latest_tick(cron: str, now: datetime) -> datetime:
    """The most recent tick of `cron` at or before `now`, in the project's time zone."""
    local = now.astimezone(zone())
    # croniter's get_prev() is strictly before its start: start just after `now` so that a
    # tick falling exactly on `now` counts, then step back if that overshot.
    tick: datetime = croniter(cron, local + timedelta(seconds=1)).get_prev(datetime)
    if tick > local:
        tick = croniter(cron, local).get_prev(datetime)
    return tick


def next_tick(cron: str, now: datetime) -> datetime:
    return croniter(cron, now.astimezone(zone())).get_next(datetime)  # type: ignore[no-any-return]


class Scheduler:
    """Leader-only: enqueue each schedule's most recent tick if it was not enqueued yet."""

    def __init__(self, using: str, clock: Clock) -> None:
        self.using = using
        self.clock = clock

    def run_once(self) -> list[str]:
        """Enqueue every schedule's due tick; returns the names enqueued. A schedule that
        fails is logged and skipped, so one bad entry cannot hold up the others."""
        now = self.clock()
        enqueued = []
        for schedule in schedules():
            try:
                if self.enqueue_due(schedule, latest_tick(schedule.cron, now)):
                    enqueued.append(schedule.name)
            except (DatabaseError, InterfaceError):
                raise
            except Exception:
                logger.exception("periodic %s: could not enqueue its tick", schedule.name)
        return enqueued

    def enqueue_due(self, schedule: Schedule, tick: datetime) -> bool:
        ticks = PeriodicTick.objects.using(self.using)
        with transaction.atomic(using=self.using):
            _, created = ticks.get_or_create(name=schedule.name, defaults={"last_tick": tick})
            if not created and not ticks.filter(name=schedule.name, last_tick__lt=tick).update(
                last_tick=tick
            ):
                return False
            self._enqueue(schedule, tick)
        logger.info("periodic %s: enqueued the %s tick", schedule.name, tick.isoformat())
        return True

    def _enqueue(self, schedule: Schedule, tick: datetime) -> None:
        if schedule.task:
            task = import_string(schedule.task)
            if schedule.queue:
                task = task.using(queue_name=schedule.queue)
            task.enqueue(*schedule.args, **schedule.kwargs)
        else:
            queue(schedule.queue or "default", using=self.using).enqueue(
                schedule.payload, unique_key=f"periodic:{schedule.name}:{tick.isoformat()}"
            )
