"""Flow control's values: the `Limits` of a queue, their parsing, and which limits are in force.

A queue's limits come from three places, and each limit is resolved on its own: the
operator's override on the Consumer row (operations.set_limits) wins, then the code's
`@consumer(...)` options, then `ALKQUEUE["QUEUES"][name]`. The claim enforces them
(sql/flow.py); docs/flow-control.md has the rules and the design.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from .exceptions import InvalidOption

#: Each cap and each rate's count is an int in 1..MAX_LIMIT.
MAX_LIMIT = 100_000
#: The longest period a rate may count over (a day).
MAX_PERIOD = 86_400.0
#: The limit names, in the order the docs, the admin and the storage list them.
NAMES = ("concurrency", "key_concurrency", "rate", "key_rate")
#: Where a limit in force comes from.
CODE, SETTINGS, OVERRIDE = "code", "settings", "override"
#: Seconds a process keeps the limits it read before reading them again (a worker's claim
#: and Queue.claim alike): a change applies within this long, one default poll interval.
REFRESH_EVERY = 1.0

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_RATE_RE = re.compile(r"\s*(\d+)\s*/\s*([smh])\s*")


@dataclasses.dataclass(frozen=True)
class Rate:
    """At most `count` claims in any half-open window of `period` seconds."""

    count: int
    period: float

    def __str__(self) -> str:
        for unit, seconds in _UNITS.items():
            if self.period == seconds:
                return f"{self.count}/{unit}"
        return f"{self.count} per {self.period:g} s"


@dataclasses.dataclass(frozen=True)
class Limits:
    """A queue's caps and rates; None is "no limit"."""

    concurrency: int | None = None
    key_concurrency: int | None = None
    rate: Rate | None = None
    key_rate: Rate | None = None

    def any(self) -> bool:
        return any(getattr(self, name) is not None for name in NAMES)

    def holds_slots(self) -> bool:
        """Whether a claim holds a slot until its ack: a cap is set."""
        return self.concurrency is not None or self.key_concurrency is not None

    def stored(self) -> dict[str, Any]:
        """The JSON form kept in Consumer.code_limits (limits that are set only)."""
        return {name: stored_value(getattr(self, name)) for name in NAMES
                if getattr(self, name) is not None}  # fmt: skip

    def describe(self) -> dict[str, str | None]:
        """Each limit as text ("100/s", "8"), None when unlimited: for the admin and status."""
        return {name: None if (value := getattr(self, name)) is None else str(value)
                for name in NAMES}  # fmt: skip


NO_LIMITS = Limits()


@dataclasses.dataclass(frozen=True)
class LimitsInForce:
    """The limits a queue's claims enforce, and where each comes from (CODE, SETTINGS or
    OVERRIDE; a limit that is None everywhere has no entry)."""

    limits: Limits
    sources: dict[str, str]


# -- parsing -------------------------------------------------------------------------------


def cap(value: object, option: str) -> int | None:
    """A concurrency cap: None or an int (not a bool) in 1..MAX_LIMIT."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOption(f"{option} must be an int or None, not {type(value).__name__}")
    if not 1 <= value <= MAX_LIMIT:
        raise InvalidOption(f"{option} must be in 1..{MAX_LIMIT}, got {value}")
    return value


def rate(value: object, option: str) -> Rate | None:
    """None, "N/s" | "N/m" | "N/h", (N, timedelta or seconds) or a Rate; N in 1..MAX_LIMIT."""
    if value is None:
        return None
    if isinstance(value, Rate):
        count, period = value.count, value.period
    elif isinstance(value, str):
        match = _RATE_RE.fullmatch(value)
        if match is None:
            raise InvalidOption(
                f'{option} must be written "N/s", "N/m" or "N/h" (or (N, timedelta)), '
                f"not {value!r:.80}"
            )
        count, period = int(match[1]), _UNITS[match[2]]
    elif isinstance(value, tuple | list) and len(value) == 2:
        count, span = value
        period = _period(span, option)
    else:
        raise InvalidOption(
            f'{option} must be "N/s", "N/m", "N/h" or (N, timedelta), not {value!r:.80}'
        )
    return Rate(cap(count, f"{option}'s count") or 0, _period(period, option))


def _period(span: object, option: str) -> float:
    if isinstance(span, timedelta):
        seconds = span.total_seconds()
    elif isinstance(span, int | float) and not isinstance(span, bool):
        seconds = float(span)
    else:
        raise InvalidOption(f"{option}'s period must be a timedelta, not {type(span).__name__}")
    if not 0.001 <= seconds <= MAX_PERIOD:  # also refuses NaN
        raise InvalidOption(f"{option}'s period must be 1 ms to 1 day, got {seconds} s")
    return seconds


def limits(
    *,
    concurrency: object = None,
    key_concurrency: object = None,
    rate: object = None,
    key_rate: object = None,
) -> Limits:
    """Checked limits: InvalidOption names the first bad one."""
    return Limits(
        concurrency=cap(concurrency, "concurrency"),
        key_concurrency=cap(key_concurrency, "key_concurrency"),
        rate=_rate(rate, "rate"),
        key_rate=_rate(key_rate, "key_rate"),
    )


_rate = rate  # the parser, under a name the keyword argument above does not shadow


def parse(name: str, value: object) -> int | Rate | None:
    """One limit by its name."""
    if name not in NAMES:
        raise InvalidOption(f"unknown limit {name!r}; the limits are {', '.join(NAMES)}")
    return cap(value, name) if name in ("concurrency", "key_concurrency") else _rate(value, name)


def stored_value(value: int | Rate | None) -> Any:
    """A limit's JSON form: an int, [count, period seconds] for a rate, or None."""
    return [value.count, value.period] if isinstance(value, Rate) else value


def from_stored(stored: Mapping[str, Any]) -> dict[str, int | Rate | None]:
    """Stored limits back as values; entries that no longer parse are left out (a stored
    value is checked when written, so this only guards against hand-edited rows)."""
    values: dict[str, int | Rate | None] = {}
    for name, value in stored.items():
        try:
            values[name] = parse(name, tuple(value) if isinstance(value, list) else value)
        except InvalidOption:
            continue
    return values


# -- the limits in force -------------------------------------------------------------------


def code_limits(queue: str) -> Limits | None:
    """The limits of the queue's @consumer in this process, if it has one."""
    from .consumers import registry

    spec = registry.get(queue)
    return None if spec is None else spec.limits


def settings_limits(queue: str) -> Limits:
    """The limits ALKQUEUE["QUEUES"][queue] sets (checked with the settings)."""
    from .conf import get_settings

    options = get_settings().QUEUES.get(queue, {})
    return limits(**{name: options.get(name) for name in NAMES})


def resolve(
    code: Limits | None, settings: Limits, overrides: Mapping[str, int | Rate | None]
) -> LimitsInForce:
    """Each limit on its own: an override (None included: "no limit") wins, then the
    code's, then the settings'. A limit set in both code and settings to different values
    is the system check alkqueue.E005's error; here the code's wins."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in NAMES:
        if name in overrides:
            values[name], source = overrides[name], OVERRIDE
        elif code is not None and getattr(code, name) is not None:
            values[name], source = getattr(code, name), CODE
        else:
            values[name], source = getattr(settings, name), SETTINGS
        if values[name] is not None or source == OVERRIDE:
            sources[name] = source
    return LimitsInForce(Limits(**values), sources)


def limits_in_force(queue: str, *, using: str = "default") -> LimitsInForce:
    """The limits the claims of `queue` enforce now, read from the Consumer row (overrides,
    and the code's limits as the worker wrote them) and this process's code and settings."""
    from .models import Consumer

    row = (
        Consumer.objects.using(using)
        .filter(queue=queue)
        .values_list("code_limits", "limit_overrides")
        .first()
    )
    return limits_from_row(queue, *(row or (None, None)))


def limits_from_row(
    queue: str, stored_code: Mapping[str, Any] | None, stored_overrides: Mapping[str, Any] | None
) -> LimitsInForce:
    """The limits in force from a Consumer row's two columns, already read (no query; no row:
    both None): this process's code, else the limits another process's code wrote, then the
    settings, under the overrides."""
    code = code_limits(queue)
    if code is None and stored_code:  # served by another process's code: its written limits
        code = Limits(**from_stored(stored_code))  # type: ignore[arg-type]
    return resolve(code, settings_limits(queue), from_stored(stored_overrides or {}))


class LimitsCache:
    """The limits in force per (alias, queue), read again once `every` seconds have passed:
    what a claim asks before it chooses its statement, so that an unlimited queue's claim
    costs a dict lookup more and no query."""

    def __init__(
        self, every: float = REFRESH_EVERY, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.every = every
        self.monotonic = monotonic
        self._read: dict[tuple[str, str], tuple[float, Limits]] = {}
        self._room_at: dict[tuple[str, str], float] = {}
        self._short: set[tuple[str, str]] = set()

    def get(self, queue: str, using: str) -> Limits:
        now = self.monotonic()
        cached = self._read.get((using, queue))
        if cached is not None and now - cached[0] < self.every:
            return cached[1]
        current = limits_in_force(queue, using=using).limits
        self._read[(using, queue)] = (now, current)
        return current

    def note_short(self, queue: str, using: str, short: bool) -> None:
        """What the last claim of `queue` in this process found: fewer jobs than it asked
        for (its limits, or an empty queue, held some back) or not."""
        if short:
            self._short.add((using, queue))
        else:
            self._short.discard((using, queue))

    def slots_wanted(self, queue: str, using: str) -> bool:
        """Whether a claimed job of `queue` holds a slot that a claim is waiting for: the
        queue has a cap and its last claim here came back short."""
        cached = self._read.get((using, queue))
        if cached is None or not cached[1].holds_slots():
            return False
        return (using, queue) in self._short

    def forget(self) -> None:
        """Read every queue's limits again at its next claim (after set_limits, in tests)."""
        self._read.clear()
        self._room_at.clear()
        self._short.clear()

    def note_room_in(self, queue: str, using: str, seconds: float | None) -> None:
        """What the last claim of `queue` found: its rate frees room in `seconds` (None:
        it was not held back by its rate). A worker looks again then, not a poll later."""
        if seconds is None:
            self._room_at.pop((using, queue), None)
        else:
            self._room_at[(using, queue)] = self.monotonic() + seconds

    def room_at(self, queue: str, using: str) -> float:
        """The monotonic time at which the queue's rate frees room (inf: not held back)."""
        return self._room_at.get((using, queue), float("inf"))


#: The process's cache, shared by every Queue.
cache = LimitsCache()
