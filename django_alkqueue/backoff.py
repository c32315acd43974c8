"""Retry delay curves. Pure functions of the attempt number: no database, no clock."""

from __future__ import annotations

import random
from collections.abc import Iterable

from . import validation
from .exceptions import InvalidOption

#: No computed retry delay exceeds one hour unless a policy asks for a larger cap.
DEFAULT_MAX_DELAY = 3600.0
# 2**64 times any sane base is far above any cap; clamping the exponent avoids OverflowError.
_MAX_EXPONENT = 64


def exponential_cap(attempt: int, base: float, max_delay: float = DEFAULT_MAX_DELAY) -> float:
    """`min(base * 2**(attempt-1), max_delay)`, safe for any attempt."""
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    return min(base * 2.0**exponent, max_delay)


def equal_jitter(cap: float, rng: random.Random | None = None) -> float:
    """A delay drawn uniformly from [cap/2, cap]: never zero, never a thundering herd."""
    return (rng or random).uniform(cap / 2, cap)


def exponential_delay(
    attempt: int,
    base: float,
    max_delay: float = DEFAULT_MAX_DELAY,
    rng: random.Random | None = None,
) -> float:
    """The core's retry curve: equal-jitter exponential backoff, capped at one hour."""
    return equal_jitter(exponential_cap(attempt, base, max_delay), rng)


BACKOFFS = ("exponential", "linear", "constant")


class RetryPolicy:
    """How a consumer's failed jobs are retried.

    exponential: cap = min(base * 2**(attempt-1), max_delay)
    linear:      cap = min(base * attempt, max_delay)
    constant:    cap = min(base, max_delay)
    With jitter (the default) the delay is drawn uniformly from [cap/2, cap], else it is cap.
    `retry_on`: exception types worth a retry; any other exception dead-letters at once.
    """

    def __init__(
        self,
        backoff: str = "exponential",
        base: float | None = None,
        max_delay: float = DEFAULT_MAX_DELAY,
        jitter: bool = True,
        retry_on: tuple[type[BaseException], ...] | None = None,
    ) -> None:
        if backoff not in BACKOFFS:
            raise InvalidOption(
                f"unknown backoff {validation.shown(backoff, repr)}; use one of "
                f"{', '.join(BACKOFFS)}"
            )
        # The core's duration rule: finite, >= 0, within a century (an infinite delay would
        # fail the retry that computes a run_at from it).
        base = None if base is None else validation.seconds(base, "base")
        max_delay = validation.seconds(max_delay, "max_delay")
        if not isinstance(jitter, bool):
            raise InvalidOption(
                f"jitter must be True or False, not {validation.shown(jitter, repr)}"
            )
        if retry_on is not None:
            if not isinstance(retry_on, Iterable):
                raise InvalidOption(
                    "retry_on must be a tuple of exception types: "
                    f"{validation.shown(retry_on, repr)}"
                )
            retry_on = tuple(retry_on)
            if not all(isinstance(t, type) and issubclass(t, BaseException) for t in retry_on):
                raise InvalidOption("retry_on must be a tuple of exception types")
        self.backoff = backoff
        self.base = base
        self.max_delay = max_delay
        self.jitter = jitter
        self.retry_on = retry_on

    def __repr__(self) -> str:
        return (
            f"RetryPolicy(backoff={self.backoff!r}, base={self.base!r}, "
            f"max_delay={self.max_delay!r}, jitter={self.jitter!r}, retry_on={self.retry_on!r})"
        )

    def cap(self, attempt: int, base: float) -> float:
        if self.backoff == "exponential":
            return exponential_cap(attempt, base, self.max_delay)
        if self.backoff == "linear":
            return min(base * max(attempt, 1), self.max_delay)
        return min(base, self.max_delay)

    def delay(self, attempt: int, base: float, rng: random.Random | None = None) -> float:
        """Seconds to wait after `attempt` failed; `base` is the job's backoff_base stamp."""
        cap = self.cap(attempt, self.base if self.base is not None else base)
        return equal_jitter(cap, rng) if self.jitter else cap

    def retries(self, error: BaseException) -> bool:
        return self.retry_on is None or isinstance(error, self.retry_on)

    def as_dict(self) -> dict[str, object]:
        """What the Consumer table and the admin show."""
        return {
            "backoff": self.backoff,
            "base": self.base,
            "max_delay": self.max_delay,
            "jitter": self.jitter,
            "retry_on": None
            if self.retry_on is None
            else [f"{t.__module__}.{t.__qualname__}" for t in self.retry_on],
        }
