"""A worker whose loop dies stops: it releases its jobs, stops heartbeating and exits 70.

Each test runs a real `alk_worker --burst` subprocess in which tests/dying_loops.py makes one
loop's service raise, as a bug would (issue 33, defect 10: the acker's thread died, the
worker kept heartbeating as "live", its job was never acked and --burst hung).
"""

from __future__ import annotations

import re
import signal
import subprocess

import pytest
from django.db import connection

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage, Worker
from django_alkqueue.sql import dialect_for
from django_alkqueue.worker.exits import EXIT_SOFTWARE
from testproject.shop.models import HandlerRun
from tests.conftest import wait_until
from tests.dying_loops import LOOPS
from tests.workers import Watched, start_worker

pytestmark = pytest.mark.django_db(transaction=True)


def dying(loop: str) -> dict[str, str]:
    """The environment of a worker whose `loop` dies (tests/dying_loops.py)."""
    return {"ALKQUEUE_EXTRA_CONSUMERS": "tests.dying_loops", "ALKQUEUE_TEST_DYING_LOOP": loop}


def run_with_dying_loop(loop: str, *args: str) -> tuple[int, str]:
    process = start_worker(*args, env=dying(loop))
    try:
        output, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"the worker hung after its {loop} loop died:\n{output}") from None
    return process.returncode, output


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_worker_whose_loop_dies_releases_its_job_unregisters_and_exits_70(loop):
    if loop == "alk-listener" and not dialect_for(connection).supports_notify:
        pytest.skip("the listener runs only where the dialect has NOTIFY")
    job = queue("shop-reports").enqueue({"sleep": 1.5})

    code, output = run_with_dying_loop(loop, "--queue", "shop-reports", "--burst")

    assert code == EXIT_SOFTWARE, output
    assert f"{loop}: the loop died; stopping the worker" in output
    assert "MadeToDie" in output  # the traceback of what killed it
    assert f"stopped because the {loop} loop died; exit status 70" in output
    # Its job is not left claimed: it is back for another worker or this one restarted,
    # with its attempt and a crash counted when its handler ran as the loop died (its
    # second crash dead-letters it: tests/test_crashes.py), untouched when it was never
    # taken; or the shutdown acked it.
    left = list(QueueMessage.objects.filter(id=job.id))
    states = [(row.claim_token, row.attempts, row.crashes) for row in left]
    assert states in ([], [(None, 0, 0)], [(None, 1, 1)]), output
    # No heartbeat outlives the worker: its row is gone, so no one takes it for live.
    assert not Worker.objects.exists()


def test_the_shutdown_acks_what_a_dead_acker_held_and_a_burst_does_not_hang():
    job = queue("shop-reports").enqueue({})

    code, output = run_with_dying_loop("alk-acker", "--queue", "shop-reports", "--burst")

    assert code == EXIT_SOFTWARE, output
    assert HandlerRun.objects.filter(job_id=job.id).count() == 1
    assert not QueueMessage.objects.filter(id=job.id).exists()


def test_the_supervisor_restarts_a_child_whose_loop_died():
    supervisor = Watched(
        start_worker("--processes", "2", "--queue", "shop-reports", env=dying("alk-status"))
    )
    try:
        wait_until(lambda: supervisor.output.count("exited with 70; restarting it") >= 2, 60)
    finally:
        supervisor.process.send_signal(signal.SIGTERM)
        assert supervisor.process.wait(60) == 0, supervisor.output


def test_the_supervisor_waits_longer_before_each_restart_of_a_child_that_keeps_crashing():
    supervisor = Watched(
        start_worker("--processes", "2", "--queue", "shop-reports", env=dying("alk-status"))
    )
    try:
        wait_until(lambda: supervisor.output.count("restarting it in 4 s") == 2, 90)
        delays = re.findall(r"exited with 70; restarting it in (\d+) s", supervisor.output)
        # Each child's own curve; one child's wait does not hold back the other's restart.
        assert sorted(delays[:6]) == ["1", "1", "2", "2", "4", "4"], supervisor.output
    finally:
        supervisor.process.send_signal(signal.SIGTERM)
        assert supervisor.process.wait(60) == 0, supervisor.output
