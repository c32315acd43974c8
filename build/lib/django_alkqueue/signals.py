"""Django signals sent as jobs change state. Each is sent with `sender=Job` and `job=<Job>`.

`job_enqueued` and `job_dead_lettered` are sent by the core operations, whoever calls them;
`job_started`, `job_succeeded` and `job_retried` by the worker around each handler run.
Receivers are called robustly: an exception in one is logged and never reaches the queue, so
an alerting hook that fails cannot strand a job or stop a worker loop.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("django_alkqueue")

job_enqueued = Signal()
job_started = Signal()
job_succeeded = Signal()
job_retried = Signal()
job_dead_lettered = Signal()


def listened(signal: Signal, sender: Any) -> bool:
    """Whether `signal` has a live receiver for `sender`. A signal nobody connected to
    answers without has_listeners' lookup, as Signal.send does."""
    return bool(signal.receivers) and signal.has_listeners(sender)


def announce(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """Send `signal` to every receiver; log, don't raise, what a receiver raises."""
    if not listened(signal, sender):
        return
    for receiver, response in signal.send_robust(sender=sender, **kwargs):
        if isinstance(response, Exception):
            logger.error("signal receiver %r raised %r", receiver, response, exc_info=response)
