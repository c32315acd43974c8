"""The handlers of the crash tests (tests/test_process_pool_crashes.py,
tests/test_supervisor_crashes.py), which register them on queues of their own: each notes,
as it starts, the crashes its row has counted so far and its pid, then takes its process
down or waits to be killed; and what the tests read back."""

from __future__ import annotations

import ctypes
import os
import resource
import time
from typing import Any

from django_alkqueue import Job
from django_alkqueue.jobs import CRASHED_ITS_WORKER
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.shop.models import HandlerRun


def note_start(job: Job) -> None:
    crashes = QueueMessage.objects.get(id=job.id).crashes
    HandlerRun.objects.create(queue=job.queue, job_id=job.id, attempt=job.attempts,
                              note=f"crashes={crashes} pid={os.getpid()}")  # fmt: skip


def exit_every_time(payload: Any, job: Job) -> None:
    note_start(job)
    os._exit(3)


def segfault_every_time(payload: Any, job: Job) -> None:
    note_start(job)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from the test
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def wait_to_be_killed_once(payload: Any, job: Job) -> None:
    note_start(job)
    if job.attempts == 1:
        time.sleep(60)


def notes(job_id: int) -> list[tuple[int, str]]:
    """Each run's attempt and the crashes counted before it."""
    runs = HandlerRun.objects.filter(job_id=job_id).order_by("id")
    return [(attempt, note.split(" pid=")[0]) for attempt, note in
            runs.values_list("attempt", "note")]  # fmt: skip


def assert_dead_after_two_crashes(job_id: int, died_of: str, output: str) -> None:
    letter = DeadLetter.objects.filter(job_id=job_id).first()
    assert letter is not None, output
    assert (letter.reason, letter.attempts) == (CRASHED_ITS_WORKER, 2), output
    assert died_of in (letter.last_error or ""), letter.last_error
    assert notes(job_id) == [(1, "crashes=0"), (2, "crashes=1")]
