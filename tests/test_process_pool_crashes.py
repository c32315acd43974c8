"""Issue 48, item 2, in the process pool: a handler that takes its child process down itself
(os._exit, a segfault in C code) counts a crash with its retry, and its second crash
dead-letters it ("crashed its worker") long before its attempts run out. A child killed
from outside (SIGKILL: an operator, the OOM killer) is not the job's doing: no crash is
counted, and the job runs again (docs/reliability.md).

The worker subprocesses import this module as an extra consumer module
(ALKQUEUE_EXTRA_CONSUMERS); the test process itself does not register its consumers.
Each handler notes, as it starts, the crashes its row has counted so far.
"""

from __future__ import annotations

import os
import signal

import pytest

from django_alkqueue import RetryPolicy, consumer, queue
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
from tests.workers import Watched, run_manage, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

EXITING = "crash-exiting"
SEGFAULTING = "crash-segfaulting"
KILLED = "crash-killed"
CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": __name__}
NO_WAIT = RetryPolicy(backoff="constant", base=0)
#: The jobs' attempts (set at enqueue): far more than the two crashes that dead-letter one.
MANY = 25


if __name__ in os.environ.get("ALKQUEUE_EXTRA_CONSUMERS", "").split(","):
    consumer(EXITING, retry=NO_WAIT)(exit_every_time)
    consumer(SEGFAULTING, retry=NO_WAIT)(segfault_every_time)
    consumer(KILLED, retry=NO_WAIT)(wait_to_be_killed_once)


def drain(name: str) -> str:
    result = run_manage("alk_worker", "--pool", "process", "--concurrency", "1", "--burst",
                        "--poll-interval", "0.1", "--queue", name, env_extra=CONSUMERS,
                        timeout=60)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def test_a_handler_that_exits_its_child_twice_is_dead_lettered_as_crashed_its_worker():
    job = queue(EXITING, max_attempts=MANY).enqueue({})

    output = drain(EXITING)

    assert_dead_after_two_crashes(job.id, "exited with status 3", output)


def test_a_handler_that_segfaults_its_child_twice_is_dead_lettered_as_crashed_its_worker():
    job = queue(SEGFAULTING, max_attempts=MANY).enqueue({})

    output = drain(SEGFAULTING)

    assert_dead_after_two_crashes(job.id, "killed by SIGSEGV", output)


def test_a_child_killed_from_outside_counts_no_crash_and_its_job_runs_again():
    job = queue(KILLED, max_attempts=MANY).enqueue({})
    worker = Watched(start_worker("--pool", "process", "--concurrency", "1", "--poll-interval",
                                  "0.1", "--shutdown-timeout", "2", "--queue", KILLED,
                                  env=CONSUMERS))  # fmt: skip
    try:
        wait_until(lambda: notes(job.id), timeout=30, what=f"the first attempt\n{worker.output}")
        child = int(HandlerRun.objects.get(job_id=job.id).note.rsplit("pid=", 1)[1])

        os.kill(child, signal.SIGKILL)

        wait_until(lambda: not QueueMessage.objects.filter(id=job.id).exists(), timeout=30,
                   what=f"the second attempt acked\n{worker.output}")  # fmt: skip
    finally:
        stop(worker.process)
    assert notes(job.id) == [(1, "crashes=0"), (2, "crashes=0")]
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
