"""The ALKQUEUE setting: one dict, read through `get_settings()`, cached until it changes."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from . import limit_values as flow
from . import validation
from .exceptions import InvalidName, InvalidOption


@dataclasses.dataclass(frozen=True)
class AlkQueueSettings:
    #: Database alias that queues use when `using` is not given.
    DATABASE: str = "default"
    #: Largest payload accepted, in bytes of its compact UTF-8 JSON encoding.
    MAX_PAYLOAD_BYTES: int = 1024 * 1024
    #: Extra modules imported at start-up to register @consumer handlers.
    CONSUMER_MODULES: tuple[str, ...] = ()
    #: Seconds between two reclaims of lapsed leases (leader only).
    RECLAIM_INTERVAL: float = 5.0
    #: Seconds between two sweeps of expired jobs and old dead letters (leader only).
    SWEEP_INTERVAL: float = 60.0
    #: Seconds between two refreshes of a worker's registry row.
    WORKER_HEARTBEAT_INTERVAL: float = 5.0
    #: A worker whose row was not refreshed for this many seconds is shown as stale.
    WORKER_STALE_AFTER: float = 30.0
    #: Stale worker rows are deleted after this many seconds.
    WORKER_PRUNE_AFTER: float = 86400.0
    #: Seconds an ack waits to be grouped with others into one commit (0 = ack at once).
    ACK_WINDOW: float = 0.002
    #: Periodic jobs: name -> {"cron", "queue", "task" + "args"/"kwargs" | "payload"}.
    PERIODIC: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: Seconds between two scheduler passes over PERIODIC (leader only).
    SCHEDULE_INTERVAL: float = 1.0
    #: Prepare the hot statements (enqueue, claim, ack, heartbeat) on PostgreSQL, once per
    #: connection. Switch off behind a pooler that cannot keep prepared statements (PgBouncer
    #: older than 1.21 in transaction mode).
    PREPARED_STATEMENTS: bool = True
    #: The leader VACUUMs the live table when PostgreSQL counts more dead row versions than
    #: this (checked every RECLAIM_INTERVAL): the backstop for an autovacuum that falls behind
    #: a queue's churn. None: never.
    VACUUM_DEAD_TUPLES: int | None = 50_000
    #: Seconds after an enqueue's wake-up NOTIFY during which further enqueues of the same
    #: queue, outside a transaction and on the same connection, send none; workers look again
    #: once the window (plus 50 ms) has passed after each NOTIFY. 0: every enqueue notifies.
    #: Elsewhere the same window paces the wake-ups sent to the workers of this host
    #: (sql/postgresql/wake_pacing.py, sql/local_wakeups.py).
    NOTIFY_WINDOW: float = 0.005
    #: Where workers on SQLite, MariaDB and MySQL bind the sockets through which enqueues on
    #: the same host wake them (sql/local_wakeups.py); None: the system's temporary directory.
    #: Processes that should wake each other must see the same directory.
    WAKEUP_DIRECTORY: str | None = None
    #: Database alias used for LISTEN (a direct connection when claims go through PgBouncer).
    LISTEN_DATABASE: str | None = None
    #: Seconds of per-minute queue statistics (QueueStat, the admin charts) kept; the leader's
    #: stats loop deletes older minutes. Default 7 days.
    STATS_RETENTION: float = 7 * 86400.0
    #: Per-queue options for queues without a @consumer (the Django Tasks backend's):
    #: name -> {"sensitive": bool, "concurrency": int, "key_concurrency": int,
    #: "rate": "N/s", "key_rate": "N/m", "keep": seconds or timedelta} (docs/flow-control.md;
    #: docs/running-jobs.md for "keep"), "timeout": seconds (docs/running-jobs.md),
    #: "fair_weights": {fair key: weight} (docs/fair-share.md).
    QUEUES: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: Which SQL dialect serves the queue's database: "auto" (PostgreSQL's and SQLite's own,
    #: the ORM dialect elsewhere) or "orm" (the ORM dialect everywhere). docs/databases.md.
    DIALECT: str = "auto"
    #: Tests only (django_alkqueue.testing): run each due job enqueued in a transaction when
    #: it commits, in the committing thread, through the worker's outcome rules.
    RUN_ON_COMMIT: bool = False
    #: The most bytes of the output (its handler's return value as JSON) the history records
    #: of a job; a larger one is recorded as a note instead (docs/running-jobs.md). Default 32 KiB.
    MAX_OUTPUT_BYTES: int = 32 * 1024
    #: A bearer token that opens the Prometheus view (django_alkqueue.metrics) to a scraper
    #: without a Django login; None: only staff users with the view permission get in.
    METRICS_TOKEN: str | None = None


_FIELDS = {f.name for f in dataclasses.fields(AlkQueueSettings)}

#: Beyond this a duration would overflow the timestamps computed from it.
_MAX_SECONDS = 100 * 365 * 86400.0
#: PostgreSQL stores at most 1 GB in one field.
_MAX_PAYLOAD_LIMIT = 2**30


class SettingsErrors(ImproperlyConfigured):
    """Every problem found in the ALKQUEUE setting, each a sentence of its own: the system
    check alkqueue.E003 reports each as an error (checks.py)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(" ".join(problems))
        self.problems = problems


#: A rule takes the setting's label (`ALKQUEUE['ACK_WINDOW']`) and its value, and returns the
#: value as the settings hold it, or raises ImproperlyConfigured naming both.
Rule = Callable[[str, Any], Any]


def _shown(value: Any) -> str:
    """repr(value) for a message, whatever the value (validation.shown)."""
    return validation.shown(value, repr)


def _expected(label: str, value: Any, what: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{label} is {validation.shown(value, repr)}; expected {what}.")


def _seconds(*, positive: bool) -> Rule:
    """A finite number of seconds (int or float, not a bool), > 0 or >= 0."""
    what = f"a number of seconds {'> 0' if positive else '>= 0'}, at most {_MAX_SECONDS:.0f}"

    def check(key: str, value: Any) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _expected(key, value, what)
        # Compared before any float(): an int past float's range would raise OverflowError.
        if value > _MAX_SECONDS or value < 0 or (positive and value == 0):
            raise _expected(key, value, what)
        if math.isnan(value):
            raise _expected(key, value, what)
        return float(value)

    return check


def _duration(key: str, value: Any) -> float:
    """A number of seconds > 0, or a timedelta of them."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    return float(_seconds(positive=True)(key, value))


def _int_in(low: int, high: int) -> Rule:
    def check(key: str, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise _expected(key, value, f"an int in {low}..{high}")
        return value

    return check


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _expected(key, value, "True or False")
    return value


def _alias(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _expected(key, value, "a database alias (a non-empty string)")
    return value


def _directory(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value or "\0" in value:
        raise _expected(key, value, "a directory path (a non-empty string)")
    return value


def _optional(rule: Rule) -> Rule:
    def check(key: str, value: Any) -> Any:
        return None if value is None else rule(key, value)

    return check


def _module_names(key: str, value: Any) -> tuple[str, ...]:
    what = "a list or tuple of dotted module names"
    if not isinstance(value, list | tuple):
        raise _expected(key, value, what)
    if not all(isinstance(name, str) and name for name in value):
        raise _expected(key, value, what)
    return tuple(value)


def _periodic(key: str, value: Any) -> dict[str, dict[str, Any]]:
    """The shape only: each entry's cron, queue and task are checked by alkqueue.E002."""
    what = "a dict of entry name (a string) to a dict of the entry's options"
    if not isinstance(value, dict):
        raise _expected(key, value, what)
    for name, entry in value.items():
        if not isinstance(name, str) or not name or not isinstance(entry, dict):
            raise _expected(key, value, what)
    return value


def _limit(name: str) -> Rule:
    """One of flow control's limits, as limit_values.parse checks it."""

    def check(key: str, value: Any) -> Any:
        try:
            return flow.parse(name, value)
        except InvalidOption as exc:
            raise ImproperlyConfigured(f"{key}: {exc}.") from None

    return check


def _fair_weights(key: str, value: Any) -> dict[str, int]:
    """{fair key: weight}: each key as enqueue(fair_key=) takes it, each weight in 1..1000."""
    if not isinstance(value, dict):
        raise _expected(key, value, "a dict of fair key to weight")
    for fair_key, weight in value.items():
        try:
            validation.fair_key(fair_key)
            validation.fair_weight(weight)
        except InvalidOption as exc:
            raise ImproperlyConfigured(f"{key}[{_shown(fair_key)}]: {exc}.") from None
    return value


#: What each key of ALKQUEUE["QUEUES"][name] accepts; a new per-queue option is one line.
QUEUE_OPTION_RULES: dict[str, Rule] = {
    "sensitive": _boolean,
    "timeout": _optional(_seconds(positive=True)),
    "keep": _duration,
    "fair_weights": _fair_weights,
    **{name: _limit(name) for name in flow.NAMES},
}


def _queues(key: str, value: Any) -> dict[str, dict[str, Any]]:
    """Every queue's entry checked, every problem of every entry reported at once."""
    if not isinstance(value, dict):
        raise _expected(key, value, "a dict of queue name to a dict of that queue's options")
    problems = [problem for name, options in value.items()
                for problem in _queue_problems(key, name, options)]  # fmt: skip
    if problems:
        raise SettingsErrors(problems)
    return value


def _queue_problems(key: str, name: Any, options: Any) -> list[str]:
    """What is wrong with one entry of ALKQUEUE["QUEUES"]: its name, then each of its
    options (an unknown one, then each bad value)."""
    where = f"{key}[{_shown(name)}]"
    try:
        validation.queue_name(name)
    except InvalidName as exc:
        return [f"{key} names a bad queue: {exc}."]
    if not isinstance(options, dict):
        return [str(_expected(where, options, "a dict of queue options"))]
    problems = []
    unknown = sorted(set(options) - set(QUEUE_OPTION_RULES), key=_shown)
    if unknown:
        problems.append(
            f"{where} has unknown option(s) {', '.join(map(_shown, unknown))}; "
            f"valid options are {', '.join(sorted(QUEUE_OPTION_RULES))}."
        )
    for option, rule in QUEUE_OPTION_RULES.items():
        if option in options:
            try:
                rule(f"{where}[{option!r}]", options[option])
            except ImproperlyConfigured as exc:
                problems.append(str(exc))
    return problems


#: The shortest METRICS_TOKEN accepted: a guessable token would open the metrics to anyone.
_MIN_TOKEN_CHARS = 16


def _token(key: str, value: Any) -> str:
    # The message never repeats the value: it is a secret, and errors end up in logs.
    if not isinstance(value, str) or len(value) < _MIN_TOKEN_CHARS:
        raise ImproperlyConfigured(
            f"{key} must be a string of at least {_MIN_TOKEN_CHARS} characters "
            f"(got a {type(value).__name__} that is not)."
        )
    return value


def _one_of(*choices: str) -> Rule:
    def check(key: str, value: Any) -> str:
        if value not in choices or not isinstance(value, str):
            raise _expected(key, value, " or ".join(map(repr, choices)))
        return str(value)

    return check


#: What each ALKQUEUE key accepts.
RULES: dict[str, Rule] = {
    "DATABASE": _alias,
    "MAX_PAYLOAD_BYTES": _int_in(1, _MAX_PAYLOAD_LIMIT),
    "CONSUMER_MODULES": _module_names,
    "RECLAIM_INTERVAL": _seconds(positive=True),
    "SWEEP_INTERVAL": _seconds(positive=True),
    "WORKER_HEARTBEAT_INTERVAL": _seconds(positive=True),
    "WORKER_STALE_AFTER": _seconds(positive=True),
    "WORKER_PRUNE_AFTER": _seconds(positive=True),
    "ACK_WINDOW": _seconds(positive=False),
    "PERIODIC": _periodic,
    "SCHEDULE_INTERVAL": _seconds(positive=True),
    "PREPARED_STATEMENTS": _boolean,
    "VACUUM_DEAD_TUPLES": _optional(_int_in(1, 2**63 - 1)),
    "NOTIFY_WINDOW": _seconds(positive=False),
    "LISTEN_DATABASE": _optional(_alias),
    "WAKEUP_DIRECTORY": _optional(_directory),
    "STATS_RETENTION": _seconds(positive=True),
    "QUEUES": _queues,
    "DIALECT": _one_of("auto", "orm"),
    "RUN_ON_COMMIT": _boolean,
    "METRICS_TOKEN": _optional(_token),
    "MAX_OUTPUT_BYTES": _int_in(1, _MAX_PAYLOAD_LIMIT),
}


@functools.cache
def get_settings() -> AlkQueueSettings:
    """The ALKQUEUE setting, checked: ImproperlyConfigured names any bad key and its value."""
    return read_settings(getattr(django_settings, "ALKQUEUE", None))


def read_settings(raw: Any) -> AlkQueueSettings:
    """`raw` (the ALKQUEUE setting; None when absent) as settings, each key checked:
    SettingsErrors names every bad key and value, not the first only."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured(
            f"ALKQUEUE must be a dict of settings, not {type(raw).__name__} "
            f"({validation.shown(raw, repr, 80)})."
        )
    problems = []
    unknown = sorted(set(raw) - _FIELDS, key=_shown)
    if unknown:
        problems.append(
            f"Unknown ALKQUEUE setting(s) {', '.join(map(validation.shown, unknown))}; "
            f"valid keys are {', '.join(sorted(_FIELDS))}."
        )
    checked = {}
    for key, value in raw.items():
        if key not in RULES:
            continue
        try:
            checked[key] = RULES[key](f"ALKQUEUE[{key!r}]", value)
        except SettingsErrors as exc:
            problems += exc.problems
        except ImproperlyConfigured as exc:
            problems.append(str(exc))
    if problems:
        raise SettingsErrors(problems)
    return AlkQueueSettings(**checked)


@receiver(setting_changed)
def _reset_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == "ALKQUEUE":
        get_settings.cache_clear()
