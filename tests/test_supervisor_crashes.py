"""Issue 48, item 2, in the default thread pool under the `--processes` supervisor: a handler
that takes its whole worker process down (os._exit, a segfault in C code) has a crash
counted by the supervisor, which its worker told which jobs its handlers were running
(worker/job_notices.py), and its second crash dead-letters it ("crashed its worker") long
before its attempts run out. A worker process killed from outside (SIGKILL) is not the
job's doing: no crash is counted, and the job runs again once its lease lapses
(docs/reliability.md).

The worker subprocesses import this module as an extra consumer module
(ALKQUEUE_EXTRA_CONSUMERS); the test process itself does not register its consumers.
Each handler notes, as it starts, the crashes its row has counted so far and its pid.
"""

from __future__ import annotations

import os
import signal

import pytest

from django_alkqueue import consumer, queue
from django_alkqueue.models import DeadLetter, QueueMessage
from testproject.shop.models import HandlerRun
from tests.conftest import wait_until
from tests.crashing_handlers import (
    assert_dead_after_two_crashes,
    exit_every_time,
    notes,
    segfault_every_time,
    wait_to_be_killed_once,
)
from tests.workers import Watched, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

EXITING = "supervised-exiting"
SEGFAULTING = "supervised-segfaulting"
KILLED = "supervised-killed"
CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": __name__}
#: Two worker processes, one handler thread each: the supervisor runs only from two on.
SUPERVISED = ("--processes", "2", "--concurrency", "1", "--poll-interval", "0.1")
#: The jobs' attempts (set at enqueue): far more than the two crashes that dead-letter one.
MANY = 25


if __name__ in os.environ.get("ALKQUEUE_EXTRA_CONSUMERS", "").split(","):
    consumer(EXITING)(exit_every_time)
    consumer(SEGFAULTING)(segfault_every_time)
    consumer(KILLED, lease=1)(wait_to_be_killed_once)


def run_until_dead(job_id: int, name: str) -> str:
    """Two worker processes: the one still alive takes the job at once after the first
    crash, so the second comes without waiting out a restart."""
    supervisor = Watched(start_worker(*SUPERVISED, "--queue", name, env=CONSUMERS))
    try:
        wait_until(lambda: DeadLetter.objects.filter(job_id=job_id).exists(), timeout=30,
                   what=f"the dead letter\n{supervisor.output}")  # fmt: skip
    finally:
        stop(supervisor.process)
    return supervisor.output


def test_a_handler_that_exits_its_worker_process_twice_is_dead_lettered_as_crashed_its_worker():
    job = queue(EXITING, max_attempts=MANY).enqueue({})

    output = run_until_dead(job.id, EXITING)

    assert_dead_after_two_crashes(job.id, "exited with status 3", output)


def test_a_handler_that_segfaults_its_worker_process_twice_is_dead_lettered_as_crashed_its_worker():
    job = queue(SEGFAULTING, max_attempts=MANY).enqueue({})

    output = run_until_dead(job.id, SEGFAULTING)

    assert_dead_after_two_crashes(job.id, "killed by SIGSEGV", output)


def test_a_worker_process_killed_from_outside_counts_no_crash_and_its_job_runs_again():
    job = queue(KILLED, max_attempts=MANY, lease=1).enqueue({})
    supervisor = Watched(start_worker(*SUPERVISED, "--shutdown-timeout", "2", "--queue", KILLED,
                                      env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: notes(job.id), timeout=30,
                   what=f"the first attempt\n{supervisor.output}")  # fmt: skip
        process = int(HandlerRun.objects.get(job_id=job.id).note.rsplit("pid=", 1)[1])
        assert process != supervisor.pid

        os.kill(process, signal.SIGKILL)

        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), timeout=30,
                   what=f"the second attempt acked\n{supervisor.output}")  # fmt: skip
    finally:
        stop(supervisor.process)
    assert notes(job.id) == [(1, "crashes=0"), (2, "crashes=0")]
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
