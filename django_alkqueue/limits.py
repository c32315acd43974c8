"""Which limits are in force for a queue (the values and their parsing are limit_values.py's,
re-exported here).

A queue's limits come from three places, and each limit is resolved on its own: the
operator's override on the Consumer row (operations.set_limits) wins, then the code's
`@consumer(...)` options, then `ALKQUEUE["QUEUES"][name]`. The claim enforces them
(Dialect.limited_claim); docs/flow-control.md has the rules and the design.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping
from typing import Any

from .conf import get_settings
from .consumers import registry
from .exceptions import InvalidOption
from .limit_values import (
    MAX_LIMIT,
    MAX_PERIOD,
    NAMES,
    NO_LIMITS,
    Limits,
    Rate,
    cap,
    limits,
    parse,
    rate,
    stored_value,
)
from .models import Consumer
from .validation import shown

__all__ = [
    "CHANGES", "CODE", "MAX_LIMIT", "MAX_PERIOD", "NAMES", "NO_LIMITS", "OVERRIDE", "REFRESH_EVERY",
    "SETTINGS", "ChangeCount", "Ignored", "Limits", "LimitsCache", "LimitsInForce", "Rate",
    "cap", "code_limits", "from_stored", "limits", "limits_from_row", "limits_in_force",
    "parse", "rate", "resolve", "settings_limits", "stored_value",
]  # fmt: skip

logger = logging.getLogger("django_alkqueue")

#: Where a limit in force comes from.
CODE, SETTINGS, OVERRIDE = "code", "settings", "override"
#: Seconds a Queue keeps the limits it read before reading them again (a worker: at most its
#: poll interval): a change applies within this long, one default poll interval.
REFRESH_EVERY = 1.0


class ChangeCount:
    """How many times this process committed a change of some queue's limits (set_limits,
    reset_limits). Not a cache: a LimitsCache that read a queue's limits at an older count
    reads them again at its next get(), so a change applies at once in the process that made
    it; other processes see it within their refresh interval."""

    def __init__(self) -> None:
        self.value = 0

    def bump(self) -> None:
        self.value += 1


CHANGES = ChangeCount()


@dataclasses.dataclass(frozen=True)
class Ignored:
    """A limit stored on the Consumer row that does not parse (written by hand, or by a
    release that let it through): left out of the limits in force, and shown and logged."""

    name: str
    #: CODE (the code_limits column) or OVERRIDE (limit_overrides).
    source: str
    #: The stored value, as text cut short.
    stored: str


@dataclasses.dataclass(frozen=True)
class LimitsInForce:
    """The limits a queue's claims enforce, and where each comes from (CODE, SETTINGS or
    OVERRIDE; a limit that is None everywhere has no entry)."""

    limits: Limits
    sources: dict[str, str]
    #: Stored limits that do not parse, left out.
    ignored: tuple[Ignored, ...] = ()


# -- stored limits ---------------------------------------------------------------------


def from_stored(
    queue: str, source: str, stored: object
) -> tuple[dict[str, int | Rate | None], list[Ignored]]:
    """Stored limits back as values, and the entries that do not parse, which are left out:
    a stored value is checked when written, so only a row written by hand (or by a release
    that let a huge number through) holds one. Each is logged once per process."""
    if not isinstance(stored, Mapping):  # the whole column is not an object
        stored = {"*": stored}
    values: dict[str, int | Rate | None] = {}
    ignored = []
    for name, value in stored.items():
        try:
            values[name] = parse(name, tuple(value) if isinstance(value, list) else value)
        except InvalidOption as refused:
            ignored.append(Ignored(str(name), source, shown(value, repr, 80)))
            _warn_ignored(queue, source, shown(name, repr, 80), ignored[-1].stored, str(refused))
    return values, ignored


@functools.lru_cache(maxsize=256)
def _warn_ignored(queue: str, source: str, name: str, stored: str, why: str) -> None:
    """Once per process and stored value: the limits are read again every second."""
    logger.warning(
        "queue %s: the stored %s limit %s=%s is ignored: %s (docs/flow-control.md)",
        queue, source, name, stored, why,
    )  # fmt: skip


# -- the limits in force -------------------------------------------------------------------


def code_limits(queue: str) -> Limits | None:
    """The limits of the queue's @consumer in this process, if it has one."""
    spec = registry.get(queue)
    return None if spec is None else spec.limits


def settings_limits(queue: str) -> Limits:
    """The limits ALKQUEUE["QUEUES"][queue] sets (checked with the settings)."""
    options = get_settings().QUEUES.get(queue, {})
    return limits(**{name: options.get(name) for name in NAMES})


def resolve(
    code: Limits | None,
    settings: Limits,
    overrides: Mapping[str, int | Rate | None],
    ignored: tuple[Ignored, ...] = (),
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
    return LimitsInForce(Limits(**values), sources, ignored)


def limits_in_force(queue: str, *, using: str = "default") -> LimitsInForce:
    """The limits the claims of `queue` enforce now, read from the Consumer row (overrides,
    and the code's limits as the worker wrote them) and this process's code and settings."""
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
    ignored: list[Ignored] = []
    if code is None and stored_code:  # served by another process's code: its written limits
        written, ignored = from_stored(queue, CODE, stored_code)
        code = Limits(**written)  # type: ignore[arg-type]
    overrides, refused = from_stored(queue, OVERRIDE, stored_overrides or {})
    return resolve(code, settings_limits(queue), overrides, (*ignored, *refused))


class LimitsCache:
    """The limits in force per (alias, queue), each read again once `every` seconds have
    passed by the time the caller gives: what a claim asks before it chooses its statement,
    so that an unlimited queue's claim costs a dict lookup more and no query.

    Never shared between owners: each Queue keeps one for its claim() (read on its clock)
    and each worker one in its flow state (worker/flow_state.py, on the monotonic clock).
    """

    def __init__(self, every: float = REFRESH_EVERY, changes: ChangeCount = CHANGES) -> None:
        self.every = every
        self.changes = changes
        self._read: dict[tuple[str, str], tuple[float, int, Limits]] = {}

    def get(self, queue: str, using: str, at: float) -> Limits:
        """The queue's limits in force as read at most `every` seconds before `at` and since
        this process last changed limits (a reading from before the last one, a clock set
        back, reads them again)."""
        cached = self._read.get((using, queue))
        count = self.changes.value
        if cached is not None and cached[0] <= at < cached[0] + self.every and cached[1] == count:
            return cached[2]
        current = limits_in_force(queue, using=using).limits
        self._read[(using, queue)] = (at, count, current)
        return current
