"""JobSpec: a job described but not sent, built by `Queue.job()` for batch callbacks and
chains. Its payload and options are checked when it is built, so that a bad callback is
refused by the caller's code, not by the worker that fires it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.utils.dateparse import parse_datetime

from ..exceptions import InvalidOption

if TYPE_CHECKING:
    from ..jobs import Job
    from ..queues import Queue

#: The Queue attributes a spec keeps, so that the job it sends is stamped as its queue was.
QUEUE_OPTIONS = ("max_attempts", "backoff_base", "lease", "retention", "priority", "expires")
#: The enqueue() options a spec may carry.
ENQUEUE_OPTIONS = (
    "delay", "run_at", "expires", "max_attempts", "priority", "unique_key", "concurrency_key",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """One job to enqueue later: its queue (name, database, stamps), payload and options."""

    queue: str
    using: str
    payload: Any
    options: dict[str, Any]
    queue_options: dict[str, Any]

    def build_queue(self) -> Queue:
        from ..queues import Queue

        return Queue(self.queue, using=self.using, **self.queue_options)

    def enqueue(self, *, after: Sequence[Any] | None = None, payload: Any = None) -> Job:
        """Send it now, in the caller's transaction; `payload`, when given, replaces its own."""
        sent = self.payload if payload is None else payload
        return self.build_queue().enqueue(sent, after=after, **self.options)

    def stored(self) -> dict[str, Any]:
        """The JSON object a Batch row keeps it as."""
        options = dict(self.options)
        if isinstance(options.get("run_at"), datetime):
            options["run_at"] = options["run_at"].isoformat()
        return {
            "queue": self.queue,
            "payload": self.payload,
            "options": options,
            "queue_options": self.queue_options,
        }

    @classmethod
    def from_stored(cls, stored: dict[str, Any], using: str) -> JobSpec:
        options = dict(stored.get("options") or {})
        if isinstance(options.get("run_at"), str):
            options["run_at"] = parse_datetime(options["run_at"])
        return cls(
            queue=stored["queue"],
            using=using,
            payload=stored.get("payload"),
            options=options,
            queue_options=dict(stored.get("queue_options") or {}),
        )


def spec_of(queue: Queue, payload: Any, options: dict[str, Any]) -> JobSpec:
    """The JobSpec `queue.job(payload, **options)` returns, its options in seconds."""
    unknown = sorted(set(options) - set(ENQUEUE_OPTIONS))
    if unknown:
        raise InvalidOption(f"Queue.job() takes no option {unknown[0]!r}")
    kept = {name: value for name, value in options.items() if value is not None}
    for name in ("delay", "expires"):
        if name in kept and not isinstance(kept[name], int | float):
            kept[name] = kept[name].total_seconds()
    queue_options = {name: getattr(queue, name) for name in QUEUE_OPTIONS}
    return JobSpec(queue.name, queue.using, payload, kept, queue_options)


def checked_specs(specs: Sequence[object], what: str) -> list[JobSpec]:
    """Each item a JobSpec, all on one database; InvalidOption otherwise."""
    if not specs:
        raise InvalidOption(f"{what} needs at least one job (built with Queue.job())")
    for item in specs:
        if not isinstance(item, JobSpec):
            raise InvalidOption(
                f"{what} takes jobs built with Queue.job(), not {type(item).__name__}"
            )
    checked = [item for item in specs if isinstance(item, JobSpec)]
    databases = {spec.using for spec in checked}
    if len(databases) > 1:
        raise InvalidOption(f"{what}'s jobs must share one database, not {sorted(databases)}")
    return checked
