"""JobSpec: a job described but not sent, built by `Queue.job()` for batch callbacks and
chains. Its payload and options are checked when it is built, so that a bad callback is
refused by the caller's code, not by the worker that fires it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.dateparse import parse_datetime

from ..exceptions import InvalidOption
from ..jobs import Job

#: The Queue attributes a spec keeps, so that the job it sends is stamped as its queue was.
QUEUE_OPTIONS = ("max_attempts", "backoff_base", "lease", "retention", "priority", "expires")
#: The enqueue() options a spec may carry.
ENQUEUE_OPTIONS = (
    "delay", "run_at", "expires", "max_attempts", "priority", "unique_key", "concurrency_key",
    "fair_key",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """One job to enqueue later: its queue (name, database, stamps), payload and options."""

    queue: str
    using: str
    payload: Any
    options: dict[str, Any]
    queue_options: dict[str, Any]

    def enqueue(self, *, after: Sequence[Any] | None = None, payload: Any = None) -> Job:
        """Send it now, in the caller's transaction; `payload`, when given, replaces its own.
        The queue API sends it (queues.enqueue_spec, registered: it sits above)."""
        if not _senders:
            raise ImproperlyConfigured(
                "a JobSpec was sent before django_alkqueue.queues was imported: add "
                '"django_alkqueue" to INSTALLED_APPS (its ready() imports it)'
            )
        return _senders[0](self, after, payload)

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


#: Sends a JobSpec now: (spec, the jobs or ids it waits for, a payload replacing its own).
Sender = Callable[[JobSpec, Sequence[Any] | None, Any], Job]
_senders: list[Sender] = []


def register_sender(send: Sender) -> None:
    """How JobSpec.enqueue (and so a fired batch's callbacks, sent in the transaction of the
    ack below the queue API) sends a spec: queues.py registers queues.enqueue_spec when
    imported, which the app's ready() does (registered again: replaced)."""
    _senders[:] = [send]


def spec_of(
    queue: str, using: str, queue_options: dict[str, Any], payload: Any, options: dict[str, Any]
) -> JobSpec:
    """The JobSpec `queue.job(payload, **options)` returns (`queue_options`: the Queue's
    QUEUE_OPTIONS), its options in seconds."""
    unknown = sorted(set(options) - set(ENQUEUE_OPTIONS))
    if unknown:
        raise InvalidOption(f"Queue.job() takes no option {unknown[0]!r}")
    kept = {name: value for name, value in options.items() if value is not None}
    for name in ("delay", "expires"):
        if name in kept and not isinstance(kept[name], int | float):
            kept[name] = kept[name].total_seconds()
    return JobSpec(queue, using, payload, kept, queue_options)


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
