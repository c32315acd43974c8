"""The checks of `manage.py alk_health` (docs/operations.md, "Health"): each returns the
problems it found, each problem carries the exit status documented for its kind.

The database and its migrations are checked first: while either fails, the other checks
could only report the same outage again, so they are left out. Every check is a read of an
index, of the Worker table (one row per worker process) or of the leader's last readings
(a few QueueStat minutes), so a probe every few seconds costs nothing, with 1,000 queues
and 1M live jobs too (docs/benchmarks.md, "The scrape and alk_health").
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Callable, Collection
from datetime import datetime

from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from ..models import Consumer, Worker
from ..sql import ping
from .queue_stats import latest_readings
from .status import known_queues, oldest_pending_ages

# The exit statuses, one per kind of problem; 1 and 2 stay Django's (an error, bad usage).
HEALTHY = 0
DATABASE_UNREACHABLE = 3
MIGRATIONS_UNAPPLIED = 4
NO_LEADER = 5
QUEUE_BEHIND = 6
WORKER_STALE = 7
ORPHANED = 8

#: Unapplied migrations named in the problem line; the rest are counted.
MIGRATIONS_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong, as one line; `code` is the exit status of its kind."""

    check: str  # "database", "migrations", "leader", "queue", "worker" or "orphaned"
    code: int
    message: str
    subject: str | None = None  # the queue or the worker concerned


@dataclasses.dataclass(frozen=True)
class HealthOptions:
    """What to check besides the database, the migrations and the leader."""

    stale_after: float
    #: Seconds a queue's oldest pending job may wait past its run_at; None: not checked.
    max_age: float | None = None
    #: The queues `max_age` applies to; empty: every queue.
    queues: tuple[str, ...] = ()
    #: Workers whose heartbeat must be fresh.
    workers: tuple[str, ...] = ()
    #: Check this host's workers (those whose Worker row names this hostname).
    this_host: bool = False
    #: Seconds a pending job of a queue no live worker serves may wait; None: not checked.
    orphaned_after: float | None = None


@dataclasses.dataclass(frozen=True)
class ThisHost:
    """The host `alk_health` runs on, and how it asks whether one of its processes runs."""

    hostname: str
    process_exists: Callable[[int], bool]

    def gone(self, hostname: str, pid: int) -> bool:
        """A worker row of this host whose process no longer runs: dead, however fresh its
        heartbeat (it died without deleting its row). A row of another host cannot be
        checked: its heartbeat alone tells."""
        return hostname == self.hostname and not self.process_exists(pid)


def exit_status(problems: list[Problem]) -> int:
    """HEALTHY, or the lowest status among the problems: the most fundamental one."""
    return min((p.code for p in problems), default=HEALTHY)


def run_checks(
    using: str,
    now: datetime,
    options: HealthOptions,
    hostname: str | None = None,
    process_exists: Callable[[int], bool] | None = None,
) -> list[Problem]:
    """Every check `options` asks for, in order; stops after the database or the migrations."""
    unreachable = database_problem(using)
    if unreachable is not None:
        return [unreachable]
    unapplied = migration_problem(using)
    if unapplied is not None:
        return [unapplied]
    host = ThisHost(hostname or socket.gethostname(), process_exists or pid_exists)
    problems = leader_problems(using, now, options.stale_after, host)
    if options.max_age is not None:
        problems += queue_problems(using, now, options.max_age, options.queues)
    if options.workers:
        problems += worker_problems(using, now, options.workers, options.stale_after, host)
    if options.this_host:
        problems += host_problems(using, now, options.stale_after, host)
    if options.orphaned_after is not None:
        problems += orphaned_problems(using, now, options.orphaned_after, options.stale_after, host)
    return problems


def database_problem(using: str) -> Problem | None:
    """The database answers a trivial query, or the problem says why not."""
    try:
        ping(connections[using])
    except Exception as exc:  # whatever the driver raises, the database is what is wrong
        return unreachable(using, exc)
    return None


def unreachable(using: str, error: BaseException) -> Problem:
    """The database did not answer, or refused the role: the driver's own message, first
    line (the alk_* commands say the same when they cannot connect)."""
    first_line = str(error).strip().split("\n", 1)[0]
    return Problem(
        "database",
        DATABASE_UNREACHABLE,
        _("database %(using)r unreachable: %(error)s: %(detail)s")
        % {"using": using, "error": type(error).__name__, "detail": first_line},
    )


def migration_problem(using: str, app_label: str | None = None) -> Problem | None:
    """Every migration of every installed app (or of `app_label`) is applied: one read of
    django_migrations."""
    executor = MigrationExecutor(connections[using])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    names = [f"{m.app_label}.{m.name}" for m, _ in plan if app_label in (None, m.app_label)]
    if not names:
        return None
    shown = ", ".join(names[:MIGRATIONS_SHOWN])
    more = ""
    if len(names) > MIGRATIONS_SHOWN:
        more = _(" and %(n)d more") % {"n": len(names) - MIGRATIONS_SHOWN}
    text = ngettext(
        "%(n)d unapplied migration: %(names)s%(more)s",
        "%(n)d unapplied migrations: %(names)s%(more)s",
        len(names),
    )
    return Problem(
        "migrations",
        MIGRATIONS_UNAPPLIED,
        text % {"n": len(names), "names": shown, "more": more},
    )


def leader_problems(
    using: str, now: datetime, stale_after: float, host: ThisHost | None = None
) -> list[Problem]:
    """A live worker carries the leader mark (the leader sets it every tick, leader.py): a
    fresh heartbeat, and on this host a process that still runs."""
    leaders = (
        Worker.objects.using(using)
        .live(now, stale_after)
        .filter(is_leader=True)
        .values_list("hostname", "pid")
    )
    if any(host is None or not host.gone(name, pid) for name, pid in leaders):
        return []
    return [
        Problem(
            "leader",
            NO_LEADER,
            _("no live leader: no worker is running reclaim, sweep and the periodic schedules"),
        )
    ]


def queue_problems(
    using: str, now: datetime, max_age: float, queues: Collection[str] = ()
) -> list[Problem]:
    """Queues whose oldest pending job has waited more than `max_age` seconds past its run_at.
    Paused queues are left out: their jobs wait on purpose. Only the queues that may be
    behind (behind_suspects) are probed, so the check stays a few index probes with 1,000
    queues."""
    ages = oldest_pending_ages(using, now, behind_suspects(using, now, max_age, queues))
    paused = set(
        Consumer.objects.using(using)
        .filter(paused=True, queue__in=list(ages))
        .values_list("queue", flat=True)
    )
    return [
        Problem(
            "queue",
            QUEUE_BEHIND,
            _("queue %(name)r: oldest pending job waiting %(age)s (more than %(max)s)")
            % {"name": name, "age": _seconds(age), "max": _seconds(max_age)},
            name,
        )
        for name, age in sorted(ages.items())
        if age > max_age and name not in paused
    ]


def behind_suspects(
    using: str, now: datetime, max_age: float, queues: Collection[str] = ()
) -> Collection[str] | None:
    """The queues (of `queues`, or all) whose oldest pending job may have waited more than
    `max_age` now, from the leader's last readings (queue_stats.latest_readings): its age then
    plus the time since, or the time since for a queue it read no due job in. A queue named
    in `queues` that the leader has not read is a suspect; None (every queue) when there is
    no recent reading at all (no live leader: that check reports it)."""
    readings = latest_readings(using, now)
    if not readings:
        return list(queues) or None
    suspects = []
    for name in queues or readings:
        reading = readings.get(name)
        if reading is None:
            suspects.append(name)
            continue
        since = max((now - reading.read_at).total_seconds(), 0.0)
        if reading.oldest_pending_age() + since > max_age:
            suspects.append(name)
    return suspects


def worker_problems(
    using: str,
    now: datetime,
    worker_ids: Collection[str],
    stale_after: float,
    host: ThisHost | None = None,
) -> list[Problem]:
    """Each named worker has a row with a fresh heartbeat (unique index on worker_id), and,
    when it is of this host, a process that still runs."""
    rows = {
        worker_id: (beat, hostname, pid)
        for worker_id, beat, hostname, pid in Worker.objects.using(using)
        .filter(worker_id__in=list(worker_ids))
        .values_list("worker_id", "last_heartbeat_at", "hostname", "pid")
    }
    problems = []
    for worker_id in worker_ids:
        beat, hostname, pid = rows.get(worker_id, (None, "", 0))
        if beat is None:
            problems.append(
                Problem(
                    "worker",
                    WORKER_STALE,
                    _("worker %(id)r: not registered") % {"id": worker_id},
                    worker_id,
                )
            )
        elif (now - beat).total_seconds() > stale_after:
            problems.append(_stale(worker_id, now, beat, stale_after))
        elif host is not None and host.gone(hostname, pid):
            problems.append(_gone(worker_id, pid))
    return problems


def host_problems(using: str, now: datetime, stale_after: float, host: ThisHost) -> list[Problem]:
    """This host has a live worker (a fresh heartbeat and a process that runs), and none of
    its worker processes still running has a stale heartbeat. A process that is gone leaves
    its row until pruned: that row is not live, and not a problem of its own."""
    rows = [
        (worker_id, beat, (now - beat).total_seconds() <= stale_after, host.process_exists(pid))
        for worker_id, pid, beat in Worker.objects.using(using)
        .filter(hostname=host.hostname)
        .values_list("worker_id", "pid", "last_heartbeat_at")
    ]
    if not any(fresh and running for _, _, fresh, running in rows):
        text = _("no live worker on host %(host)r") % {"host": host.hostname}
        return [Problem("worker", WORKER_STALE, text, host.hostname)]
    return [
        _stale(worker_id, now, beat, stale_after)
        for worker_id, beat, fresh, running in rows
        if not fresh and running
    ]


def orphaned_problems(
    using: str,
    now: datetime,
    orphaned_after: float,
    stale_after: float,
    host: ThisHost | None = None,
) -> list[Problem]:
    """Queues whose oldest pending job has waited more than `orphaned_after` seconds past its
    run_at while no live worker serves them: no live Worker row lists the queue among those
    it serves (its consumers' and its task backends' queues). An enqueue into a misspelled
    queue name would otherwise wait forever in silence. Paused queues are left out: their
    jobs wait on purpose. The Worker rows, then the queue names by a loose index scan
    (status.known_queues), then one index probe per unserved queue and priority."""
    served = served_queues(using, now, stale_after, host)
    unserved = [name for name in known_queues(using) if name not in served]
    ages = oldest_pending_ages(using, now, unserved)
    late = {name: age for name, age in ages.items() if age > orphaned_after}
    paused = set(
        Consumer.objects.using(using)
        .filter(paused=True, queue__in=list(late))
        .values_list("queue", flat=True)
    )
    text = _("queue %(name)r: a pending job has waited %(age)s and no live worker serves the queue")
    return [
        Problem("orphaned", ORPHANED, text % {"name": name, "age": _seconds(age)}, name)
        for name, age in sorted(late.items())
        if name not in paused
    ]


def served_queues(
    using: str, now: datetime, stale_after: float, host: ThisHost | None = None
) -> set[str]:
    """The queues the live workers serve, as each wrote them in its Worker row at start."""
    rows = (
        Worker.objects.using(using).live(now, stale_after).values_list("queues", "hostname", "pid")
    )
    served: set[str] = set()
    for queues, hostname, pid in rows:
        if isinstance(queues, list) and (host is None or not host.gone(hostname, pid)):
            served.update(name for name in queues if isinstance(name, str))
    return served


def _stale(worker_id: str, now: datetime, beat: datetime, stale_after: float) -> Problem:
    age = _seconds((now - beat).total_seconds())
    return Problem(
        "worker",
        WORKER_STALE,
        _("worker %(id)r: last heartbeat %(age)s ago (stale after %(after)s)")
        % {"id": worker_id, "age": age, "after": _seconds(stale_after)},
        worker_id,
    )


def _gone(worker_id: str, pid: int) -> Problem:
    return Problem(
        "worker",
        WORKER_STALE,
        _("worker %(id)r: its process %(pid)d is not running on this host")
        % {"id": worker_id, "pid": pid},
        worker_id,
    )


def _seconds(value: float) -> str:
    return _("%(seconds).0f s") % {"seconds": value}


def pid_exists(pid: int) -> bool:
    """Whether a process with this id runs on this host (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True
