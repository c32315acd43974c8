"""The consumers of the defaults bench (bench/defaults.py): a no-op one, and one that sleeps
and appends its job's times to the file BENCH_DEFAULTS_TIMES names."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from django_alkqueue import consumer

NOOP = "defaults-noop"
LONG = "defaults-long"


@consumer(NOOP)
def noop(payload: Any, job: Any) -> None:
    return None


@consumer(LONG)
def sleep_and_note_times(payload: Any, job: Any) -> None:
    """Sleep `seconds`, then append `worker claimed started ended` (epoch seconds) in one
    write: the workers share the host, and an O_APPEND write of a short line is whole."""
    claimed = job.claimed_at or job.lease_expires_at - timedelta(seconds=job.lease)
    started = time.time()
    time.sleep(payload["seconds"])
    line = f"{job.claimed_by} {claimed.timestamp()} {started} {time.time()}\n"
    with open(os.environ["BENCH_DEFAULTS_TIMES"], "a") as out:
        out.write(line)
