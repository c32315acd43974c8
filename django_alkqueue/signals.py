"""Django signals sent as jobs change state. Each is sent with `sender=Job` and `job=<Job>`.

`job_enqueued`, `job_debounced` and `job_dead_lettered` are sent by the core operations,
whoever calls them; `job_started`, `job_succeeded` and `job_retried` by the worker around
each handler run.
Receivers are called robustly (Signal.send_robust): an exception in one never reaches the
queue, so an alerting hook that fails cannot strand a job or stop a worker loop. Django logs
it, once, on the logger `django.dispatch` at ERROR with its traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.dispatch import Signal

job_enqueued = Signal()
#: An enqueue with a debounce key updated its key's unclaimed job in place (docs/queues.md,
#: "Debounce"): `job` is that job as it is now; a new job sends job_enqueued.
job_debounced = Signal()
job_started = Signal()
job_succeeded = Signal()
job_retried = Signal()
job_dead_lettered = Signal()


def listened(signal: Signal, sender: Any) -> bool:
    """Whether `signal` has a live receiver for `sender`. A signal nobody connected to
    answers without has_listeners' lookup, as Signal.send does."""
    return bool(signal.receivers) and signal.has_listeners(sender)


def announce(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """Send `signal` to every receiver; what a receiver raises is logged by send_robust (on
    `django.dispatch`), not raised, and not logged a second time here."""
    if listened(signal, sender):
        signal.send_robust(sender=sender, **kwargs)


def announce_each(signal: Signal, sender: Any, jobs: Iterable[Any]) -> None:
    """announce(signal, sender, job=job) for each of `jobs` (a batch handler's call, an ack
    batch): whether anyone listens is looked up once, not once per job."""
    if listened(signal, sender):
        for job in jobs:
            signal.send_robust(sender=sender, job=job)
