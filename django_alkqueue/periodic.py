"""Periodic (cron) jobs from ALKQUEUE["PERIODIC"], enqueued by the leader's scheduler.

Each tick is enqueued exactly once: the schedule's PeriodicTick row is advanced by a
conditional UPDATE in the same transaction as the enqueue, so of two schedulers only one
advances it, and a tick whose job already ran and left the table is never enqueued again.
Ticks missed while no worker ran collapse into the most recent one (no burst); a schedule
seen for the first time starts with its most recent tick, like any missed tick.

Cron times are wall-clock times in settings.TIME_ZONE. Across a daylight-saving change each
tick still maps to instants in order (see `tick_instants` for the rule on the repeated and
the skipped hour).
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter
from django.conf import settings
from django.db import DatabaseError, IntegrityError, InterfaceError, transaction
from django.db.models import Q
from django.utils.module_loading import import_string

from . import validation
from .clock import Clock
from .conf import get_settings
from .models import PeriodicTick
from .privacy import masked
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

    @property
    def target_queue(self) -> str | None:
        """The queue a payload schedule's jobs go to; None for a task's (its args and kwargs
        are never shown)."""
        return None if self.task else self.queue or "default"

    def describe(self, mask: bool = False) -> str:
        """What each tick enqueues; with `mask`, the payload as a user who may not see the
        queue's payloads sees it (privacy.masked)."""
        if self.task:
            return f"task {self.task}"
        shown = masked(self.payload) if mask else self.payload
        return f"payload {shown!r}"


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
    if not isinstance(entry["cron"], str):  # croniter reads a str; str() of a huge int raises
        errors.append(
            f"periodic entry {name!r} has an invalid cron {validation.shown(entry['cron'], repr)}"
        )
    elif not croniter.is_valid(entry["cron"]):
        errors.append(f"periodic entry {name!r} has an invalid cron {entry['cron']!r}")
    elif never_fires(str(entry["cron"])):
        errors.append(
            f"periodic entry {name!r} has an invalid cron {entry['cron']!r}: it never fires"
        )
    try:
        validation.queue_name(entry.get("queue", "default"))
    except ValueError as exc:
        errors.append(f"periodic entry {name!r}: {exc}")
    if len(name) > MAX_NAME_LENGTH:
        errors.append(f"periodic entry name {name[:40]!r}... is over {MAX_NAME_LENGTH} chars")
    if not validation.storable_text(name):
        # PeriodicTick.name and the jobs' unique keys hold it: PostgreSQL refuses a NUL.
        errors.append(
            f"periodic entry name {name[:40]!r} has a NUL character or an unpaired surrogate"
        )
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
    except Exception as exc:  # the task's module fails on import: report, not a traceback
        return [
            f"periodic entry {name!r}: importing task {entry['task']!r} failed: "
            f"{type(exc).__name__}: {exc}"
        ]
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


#: Longer than any repeated wall-clock span of a daylight-saving change (one hour in most
#: zones, two at most): how far around `now` the offset may differ from the offset at `now`.
MAX_SHIFT = timedelta(hours=3)


def never_fires(cron: str) -> bool:
    """A valid cron with no date at all, such as "0 0 30 2 *" (30 February)."""
    try:
        croniter(cron, datetime(2000, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        return True
    return False


def fires_every_hour(cron: str) -> bool:
    hours: list[int | str] = croniter(cron).expanded[1]
    return hours == ["*"]


def tick_instants(wall: datetime, tz: ZoneInfo, every_hour: bool) -> list[datetime]:
    """The instants (UTC) at which the naive wall-clock tick `wall` fires in `tz`.

    - a wall time that exists once: that instant;
    - a wall time in the hour repeated when the clocks go back: both instants if the cron
      fires every hour (it keeps firing by real time), else only the first one, so a daily
      job runs once;
    - a wall time in the hour skipped when the clocks go forward: the instant the gap
      ends, once (with any tick of that instant).
    """
    first, second = (wall.replace(tzinfo=tz, fold=fold).astimezone(UTC) for fold in (0, 1))
    if first.astimezone(tz).replace(tzinfo=None) != wall:
        return [_gap_end(min(first, second), max(first, second), tz)]
    if every_hour and first != second:
        return [first, second]
    return [first]


def _gap_end(early: datetime, late: datetime, tz: ZoneInfo) -> datetime:
    """The instant a skipped wall-clock span ends: the first second, between the two readings
    of a time in the gap, with the offset in force after it."""
    after = late.astimezone(tz).utcoffset()
    low, high = 0, int((late - early).total_seconds())
    while low < high:
        middle = (low + high) // 2
        if (early + timedelta(seconds=middle)).astimezone(tz).utcoffset() == after:
            high = middle
        else:
            low = middle + 1
    return early + timedelta(seconds=low)


def _offset(instant: datetime, tz: ZoneInfo) -> timedelta:
    return instant.astimezone(tz).utcoffset() or timedelta(0)


def _wall(instant: datetime, offset: timedelta) -> datetime:
    return (instant + offset).replace(tzinfo=None)


def latest_tick(cron: str, now: datetime) -> datetime:
    """The most recent tick of `cron` at or before `now`, in the project's time zone.

    Wall-clock ticks are walked backwards from the latest wall time that can still map to an
    instant before `now`; the walk stops once no earlier wall time can map to a later
    instant than the best one found (only just after the clocks went back can it)."""
    tz, every_hour, now = zone(), fires_every_hour(cron), now.astimezone(UTC)
    start = now + max(_offset(now, tz), _offset(now - MAX_SHIFT, tz))
    walls = croniter(cron, start.replace(tzinfo=None) + timedelta(microseconds=1))
    best: datetime | None = None
    while True:
        wall = walls.get_prev(datetime)
        if best is not None:
            lowest = min(_offset(best, tz), _offset(min(best + MAX_SHIFT, now), tz))
            if wall <= _wall(best, lowest):
                return best.astimezone(tz)
        candidates = [t for t in tick_instants(wall, tz, every_hour) if t <= now]
        best = max([*candidates, best] if best else candidates, default=None)


def next_tick(cron: str, now: datetime) -> datetime:
    """The first tick of `cron` after `now`, in the project's time zone (the mirror image of
    `latest_tick`)."""
    tz, every_hour, now = zone(), fires_every_hour(cron), now.astimezone(UTC)
    start = now + min(_offset(now, tz), _offset(now + MAX_SHIFT, tz))
    walls = croniter(cron, start.replace(tzinfo=None))
    best: datetime | None = None
    while True:
        wall = walls.get_next(datetime)
        if best is not None:
            highest = max(_offset(best, tz), _offset(max(best - MAX_SHIFT, now), tz))
            if wall >= _wall(best, highest):
                return best.astimezone(tz)
        candidates = [t for t in tick_instants(wall, tz, every_hour) if t > now]
        best = min([*candidates, best] if best else candidates, default=None)


class PeriodicService:
    """Leader-only: enqueue each schedule's most recent tick if it was not enqueued yet."""

    def __init__(self, using: str, clock: Clock) -> None:
        self.using = using
        self.clock = clock
        #: Schedules whose cron never fires, already logged (the system check reports them).
        self.never: set[str] = set()

    #: The worker's leader runs it as a service (worker/service.py).
    name = "periodic"

    @property
    def interval(self) -> float:
        return get_settings().SCHEDULE_INTERVAL

    def run_once(self, now: datetime | None = None) -> list[str]:
        """Enqueue every schedule's due tick as of `now` (default: the clock's reading);
        returns the names enqueued. A schedule that fails is logged and skipped, so one bad
        entry cannot hold up the others."""
        now = self.clock() if now is None else now
        enqueued = []
        for schedule in schedules():
            try:
                if self._never_fires(schedule):
                    continue
                if self.enqueue_due(schedule, latest_tick(schedule.cron, now)):
                    enqueued.append(schedule.name)
            except (DatabaseError, InterfaceError):
                raise
            except Exception:
                logger.exception("periodic %s: could not enqueue its tick", schedule.name)
        return enqueued

    def _never_fires(self, schedule: Schedule) -> bool:
        if schedule.name in self.never:
            return True
        if not never_fires(schedule.cron):
            return False
        self.never.add(schedule.name)
        logger.error("periodic %s: its cron %r never fires; skipped", schedule.name, schedule.cron)
        return True

    def enqueue_due(self, schedule: Schedule, tick: datetime) -> bool:
        ticks = PeriodicTick.objects.using(self.using)
        # Advance first, create only if there is no row: a racing scheduler whose INSERT is
        # refused then writes nothing more (on InnoDB, an UPDATE after a refused INSERT of the
        # same key deadlocks with the other refused schedulers).
        behind = Q(last_tick__lt=tick) | Q(last_tick__isnull=True)
        with transaction.atomic(using=self.using):
            # The paused flag is read by the UPDATE that advances the tick, under its row
            # lock: a pause committed before it is never followed by this tick's job.
            if not ticks.filter(behind, name=schedule.name, paused=False).update(last_tick=tick):
                # A paused schedule's ticks pass unused, so a resume does not fire them.
                ticks.filter(behind, name=schedule.name, paused=True).update(last_tick=tick)
                if ticks.filter(name=schedule.name).exists():
                    return False
                try:
                    with transaction.atomic(using=self.using):
                        ticks.create(name=schedule.name, last_tick=tick)
                except IntegrityError:
                    return False  # another scheduler created it for this tick
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


def set_paused(using: str, names: list[str], paused: bool) -> int:
    """Pause or resume the named schedules (a row is made for one that has not ticked yet);
    returns how many changed. The scheduler reads the flag in the statement that advances
    the tick, so no tick after a committed pause is enqueued."""
    ticks = PeriodicTick.objects.using(using)
    with transaction.atomic(using=using):
        ensure_rows(using, names)
        return ticks.filter(name__in=names).exclude(paused=paused).update(paused=paused)


def ensure_rows(using: str, names: list[str]) -> None:
    """A row for each named schedule, `last_tick` None where it has not ticked yet."""
    PeriodicTick.objects.using(using).bulk_create(
        [PeriodicTick(name=name, last_tick=None) for name in names], ignore_conflicts=True
    )
