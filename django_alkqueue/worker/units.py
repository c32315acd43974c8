"""Units of work: how the jobs of one claim become handler calls for the threads.

A plain consumer's job is a call of its own. A batch consumer's jobs go in calls of up to its
`batch` jobs, in handout order, so one call (and one hand-off to a thread) serves many jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from ..consumers import ConsumerSpec
from ..queues import JobHandle


def worker_capacity(concurrency: int, batch: int | None, specs: list[ConsumerSpec]) -> int:
    """The most jobs a worker holds running: one per thread, or a full call per thread for
    a batch consumer, or the `--batch` prefetch when that is more."""
    return max(concurrency * jobs_per_call(specs), batch or 0)


def jobs_per_call(specs: list[ConsumerSpec]) -> int:
    """The most jobs one handler call takes: a batch consumer's batch, else 1."""
    return max((spec.batch or 1 for spec in specs), default=1)


def split(handles: list[JobHandle], spec: ConsumerSpec) -> Iterator[list[JobHandle]]:
    """The handler calls for one claim's jobs (a claim serves one queue, so one consumer)."""
    size = spec.batch or 1
    for start in range(0, len(handles), size):
        yield handles[start : start + size]


class Dispatch:
    """The claimer's hand-off: each claim's jobs told to `claimed` (Executor.claimed), then
    split into units, to `submit`."""

    def __init__(
        self,
        specs: Mapping[str, ConsumerSpec],
        submit: Callable[[list[JobHandle]], None],
        claimed: Callable[[list[JobHandle]], None],
    ) -> None:
        self.specs = specs
        self.submit = submit
        self.claimed = claimed

    def __call__(self, handles: list[JobHandle]) -> None:
        if not handles:
            return
        self.claimed(handles)
        for unit in split(handles, self.specs[handles[0].job.queue]):
            self.submit(unit)
