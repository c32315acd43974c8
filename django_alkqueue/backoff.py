"""Retry delay curves. Pure functions of the attempt number: no database, no clock."""

from __future__ import annotations

import random

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
