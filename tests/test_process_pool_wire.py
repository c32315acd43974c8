"""What crosses the pipe between a worker and its process-pool children (worker/wire.py,
child.py): outcomes keep their fields, exceptions their class when they can, a child's death
is named by its signal or exit status (and counts as its job's crash unless it came from
outside), and progress goes up as each job's latest report."""

from __future__ import annotations

import signal
import threading
from datetime import timedelta

from django_alkqueue import Cancelled, Fail, Retry, Snooze
from django_alkqueue.clock import system_clock
from django_alkqueue.worker.child import ChildRun, ProgressSender
from django_alkqueue.worker.child_exits import crashed_by_its_job, death_text
from django_alkqueue.worker.executor import error_text
from django_alkqueue.worker.wire import (
    ChildError,
    NotPortable,
    portable_value,
    raised,
    rebuilt,
)
from tests.conftest import wait_until


class NeedsTwo(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a} and {b}")


def test_a_retry_crosses_with_its_delay_and_reason():
    error = rebuilt(raised(Retry(timedelta(seconds=7), "busy"), "Retry: busy"))

    assert isinstance(error, Retry)
    assert (error.delay, error.reason) == (timedelta(seconds=7), "busy")


def test_snooze_fail_and_cancelled_cross_with_their_fields():
    snooze = rebuilt(raised(Snooze(3), "Snooze"))
    fail = rebuilt(raised(Fail("bad input"), "Fail: bad input"))
    cancelled = rebuilt(raised(Cancelled("cancelled"), "Cancelled: cancelled"))

    assert isinstance(snooze, Snooze) and snooze.delay == 3
    assert isinstance(fail, Fail) and fail.reason == "bad input"
    assert isinstance(cancelled, Cancelled) and cancelled.reason == "cancelled"


def test_an_exception_that_pickles_crosses_as_its_own_class_with_the_childs_error_text():
    error = rebuilt(raised(KeyError("sku"), "KeyError: 'sku'\n\nTraceback (in the child)"))

    assert isinstance(error, KeyError)
    assert error_text(error) == "KeyError: 'sku'\n\nTraceback (in the child)"


def test_an_exception_that_does_not_unpickle_crosses_as_a_child_error_with_its_headline():
    error = rebuilt(raised(NeedsTwo(1, 2), "NeedsTwo: 1 and 2\n\nTraceback"))

    assert isinstance(error, ChildError)
    assert str(error) == "NeedsTwo: 1 and 2"


def test_a_return_value_that_does_not_pickle_crosses_as_not_portable():
    assert portable_value({"n": 1}) == {"n": 1}
    assert portable_value(threading.Lock()) == NotPortable("lock")


def test_a_childs_death_names_its_signal_or_its_exit_status():
    assert death_text(1234, -signal.SIGKILL) == "child 1234 killed by SIGKILL"
    assert death_text(1234, 3) == "child 1234 exited with status 3"


def test_a_childs_own_exit_or_crash_signal_is_its_jobs_crash():
    assert crashed_by_its_job(3)  # os._exit(3)
    assert crashed_by_its_job(0)  # os._exit(0) mid-call: a child never exits mid-call itself
    for crash in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL):
        assert crashed_by_its_job(-crash), crash.name


def test_a_child_killed_or_terminated_from_outside_is_not_its_jobs_crash():
    assert not crashed_by_its_job(-signal.SIGKILL)  # an operator, the OOM killer
    assert not crashed_by_its_job(-signal.SIGTERM)  # an operator, the pool's time limit
    assert not crashed_by_its_job(None)  # not known to have ended


def test_a_burst_of_progress_reports_goes_up_as_a_few_messages_ending_with_the_latest():
    sent: list[tuple[object, ...]] = []
    run = ChildRun(7, ProgressSender(sent.append))

    for done in range(1, 10_001):
        run.report(done, 10_000, f"row {done}", system_clock())

    wait_until(lambda: sent and sent[-1][2] == 10_000, timeout=5, what="the last report sent")
    assert len(sent) < 100
    assert sent[-1][:5] == ("progress", 7, 10_000, 10_000, "row 10000")
