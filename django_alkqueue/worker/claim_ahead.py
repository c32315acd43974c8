"""Claim ahead: how many jobs beyond its free threads a worker claims, from what it observes.

Without `--batch`, a claim asks for the free threads plus `ClaimAhead.jobs()`: as many jobs
as the worker will start within HORIZON seconds at the rate it has been finishing handler
calls lately. No-op jobs (thousands a second) are then claimed in batches of hundreds or
thousands, one claim round trip for many jobs; jobs of a second or more give fewer than one
job ahead, so the worker claims only its free threads and leaves the rest to other workers.

Three bounds keep a held job from waiting long in this worker while another could run it:
- HORIZON (0.1 s): the time the jobs claimed ahead take to start, at the observed rate;
- LEASE_FRACTION (a tenth) of the shortest lease served, when that is shorter still: a job
  claimed ahead starts well within its first lease;
- the threads' own pace: never more than `threads x horizon / mean handler duration`, so a
  stale rate cannot claim ahead of handlers that got slow.
and MAX_CLAIM caps it like any claim.

The rate and the mean duration are exponentially weighted over the last TIME_CONSTANT
seconds, fed from the worker's running totals with an explicit clock: a worker that was
idle starts again from its free threads and ramps up within a few claims. Everything here
is this process's own observation: nothing assumes one process or host.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..queues import MAX_CLAIM

#: Seconds of observed work the jobs claimed ahead amount to.
HORIZON = 0.1
#: The most of the shortest lease served that the jobs claimed ahead amount to.
LEASE_FRACTION = 0.1
#: Seconds over which the rate and the mean duration are weighted (1/e per TIME_CONSTANT).
TIME_CONSTANT = 1.0


class ClaimAhead:
    """The estimate: feed it the worker's running totals (`observe`), read `jobs()`."""

    def __init__(
        self,
        threads: int,
        per_call: int,
        lease: float,
        *,
        horizon: float = HORIZON,
        lease_fraction: float = LEASE_FRACTION,
        time_constant: float = TIME_CONSTANT,
    ) -> None:
        self.threads = threads
        self.per_call = per_call
        self.window = min(horizon, lease_fraction * lease)
        self.time_constant = time_constant
        self._last: tuple[int, float, float] | None = None  # calls, seconds, at
        # Exponentially weighted: calls finished, their handler seconds, and time observed.
        self._calls = 0.0
        self._seconds = 0.0
        self._elapsed = 0.0

    def observe(self, calls: int, seconds: float, now: float) -> None:
        """The worker's totals so far: handler calls finished and the seconds they took,
        at the monotonic time `now`."""
        if self._last is not None:
            last_calls, last_seconds, last_at = self._last
            span = max(now - last_at, 0.0)
            keep = math.exp(-span / self.time_constant)
            self._calls = self._calls * keep + (calls - last_calls)
            self._seconds = self._seconds * keep + (seconds - last_seconds)
            self._elapsed = self._elapsed * keep + span
        self._last = (calls, seconds, now)

    def rate(self) -> float:
        """Handler calls finished per second lately (0 before two observations)."""
        return self._calls / self._elapsed if self._elapsed > 0 else 0.0

    def pace(self) -> float:
        """Handler calls the threads can finish per second at their recent mean duration;
        infinite while no call took measurable time."""
        if self._seconds <= 0:
            return math.inf
        return self.threads * self._calls / self._seconds

    def jobs(self) -> int:
        """Jobs to claim beyond the free threads: those the worker starts within the
        window at the lesser of its recent rate and its threads' pace."""
        # The epsilon keeps a product that is whole on paper (2.0) from flooring to one less.
        calls = math.floor(min(self.rate(), self.pace()) * self.window + 1e-9)
        return min(calls * self.per_call, MAX_CLAIM)


def ahead_of(
    estimate: ClaimAhead,
    totals: Callable[[], tuple[int, float]],
    monotonic: Callable[[], float] = time.monotonic,
) -> Callable[[], int]:
    """The claimer's `ahead`: at each look, feed `estimate` the worker's handler totals
    (WorkerStats.handler_totals) and read its jobs."""

    def jobs() -> int:
        estimate.observe(*totals(), monotonic())
        return estimate.jobs()

    return jobs
