"""Flow control's values: the `Limits` of a queue and their parsing, with no settings and no
database: the settings (conf.py), the @consumer options (consumers.py) and the claim
(sql/) take them. Which limits are in force for a queue is limits.py's."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from typing import Any

from .exceptions import InvalidOption
from .validation import shown

#: Each cap and each rate's count is an int in 1..MAX_LIMIT.
MAX_LIMIT = 100_000
#: The longest period a rate may count over (a day).
MAX_PERIOD = 86_400.0
#: The limit names, in the order the docs, the admin and the storage list them.
NAMES = ("concurrency", "key_concurrency", "rate", "key_rate")

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


# -- parsing -------------------------------------------------------------------------------


def cap(value: object, option: str) -> int | None:
    """A concurrency cap: None or an int (not a bool) in 1..MAX_LIMIT."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOption(f"{option} must be an int or None, not {type(value).__name__}")
    if not 1 <= value <= MAX_LIMIT:
        raise InvalidOption(f"{option} must be in 1..{MAX_LIMIT}, got {shown(value)}")
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
                f"not {shown(value, repr, 80)}"
            )
        count, period = _count(match[1], option), _UNITS[match[2]]
    elif isinstance(value, tuple | list) and len(value) == 2:
        count, span = value
        period = _period(span, option)
    else:
        raise InvalidOption(
            f'{option} must be "N/s", "N/m", "N/h" or (N, timedelta), not {shown(value, repr, 80)}'
        )
    return Rate(cap(count, f"{option}'s count") or 0, _period(period, option))


def _count(digits: str, option: str) -> int:
    """A rate's count as written: past MAX_LIMIT's digits it is refused unread (int() raises
    ValueError past 4,300 digits)."""
    if len(digits.lstrip("0")) > len(str(MAX_LIMIT)):
        raise InvalidOption(f"{option}'s count must be in 1..{MAX_LIMIT}, got {len(digits)} digits")
    return int(digits)


def _period(span: object, option: str) -> float:
    if isinstance(span, timedelta):
        seconds = span.total_seconds()
    elif isinstance(span, int | float) and not isinstance(span, bool):
        try:
            seconds = float(span)
        except OverflowError:  # an int past float's range
            raise InvalidOption(
                f"{option}'s period must be 1 ms to 1 day, got {shown(span)} s"
            ) from None
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
