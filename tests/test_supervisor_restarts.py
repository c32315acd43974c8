"""The supervisor's wait before restarting a crashed child (worker/supervisor.py): a child that
keeps crashing soon after its start waits longer each time, up to a minute; one that ran a while
starts the curve again. The subprocess behaviour is in tests/test_worker_dying_loops.py."""

from __future__ import annotations

from django_alkqueue.worker.supervisor import (
    FIRST_RESTART_DELAY,
    MOST_RESTART_DELAY,
    STABLE_AFTER,
    restart_delay,
)


def test_the_first_restart_waits_one_second():
    assert restart_delay(None, ran_for=0.2) == FIRST_RESTART_DELAY == 1.0


def test_each_quick_crash_doubles_the_wait():
    delays = [restart_delay(None, 0.1)]
    for _ in range(4):
        delays.append(restart_delay(delays[-1], ran_for=0.1))
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0]


def test_the_wait_stops_growing_at_a_minute():
    assert restart_delay(MOST_RESTART_DELAY, ran_for=0.1) == MOST_RESTART_DELAY == 60.0
    assert restart_delay(40.0, ran_for=0.1) == 60.0


def test_a_child_that_ran_long_enough_starts_the_curve_again():
    assert restart_delay(32.0, ran_for=STABLE_AFTER) == FIRST_RESTART_DELAY
    assert restart_delay(32.0, ran_for=STABLE_AFTER - 0.1) == 60.0
