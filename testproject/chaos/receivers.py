"""Records every confirmed ack of a chaos job in AckLog, from the worker's acker thread."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import DatabaseError, InterfaceError, connection

from django_alkqueue import Job, signals

from .models import AckLog

logger = logging.getLogger("testproject.chaos")

PREFIX = "chaos-"
#: Waits between attempts to write an ack record while the database is away (~16 s in all).
RETRY_WAITS = (0.1, 0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


def record_ack(sender: Any, job: Job, **kwargs: Any) -> None:
    """The ack already committed; keep trying to write its record through a short outage."""
    if not job.queue.startswith(PREFIX):
        return
    for wait in (*RETRY_WAITS, None):
        try:
            AckLog.objects.create(
                job_id=job.id,
                queue=job.queue,
                worker_id=job.claimed_by or "",
                attempt=job.attempts,
                claimed_at=job.claimed_at,
            )
            return
        except (DatabaseError, InterfaceError) as exc:
            if wait is None:
                logger.error("chaos: ack of job %s not recorded: %s", job.id, exc)
                return
            if not connection.in_atomic_block:
                connection.close()
            time.sleep(wait)


def connect() -> None:
    signals.job_succeeded.connect(record_ack, dispatch_uid="chaos-ack-log")
