"""The worker's and the supervisor's signal handling (worker/signal_relay.py): the handler
only hands the signal over; the reaction runs on a thread of its own."""

from __future__ import annotations

import os
import signal
import threading

from django_alkqueue.worker.signal_relay import SignalRelay

# Not one the test runner or the worker uses.
SIGNAL = signal.SIGUSR2


class Reactions:
    def __init__(self, lock: threading.Lock | None = None) -> None:
        self.lock = lock
        self.seen: list[tuple[int, str, bool]] = []
        self.done = threading.Event()

    def __call__(self, signum: int) -> None:
        got_lock = self.lock.acquire(timeout=10) if self.lock is not None else True
        if got_lock and self.lock is not None:
            self.lock.release()
        self.seen.append((signum, threading.current_thread().name, got_lock))
        self.done.set()


def test_a_signals_reaction_runs_on_the_relays_thread_not_the_main_one():
    reactions = Reactions()
    relay = SignalRelay(reactions)
    relay.install([SIGNAL])
    try:
        os.kill(os.getpid(), SIGNAL)
        assert reactions.done.wait(5)
    finally:
        relay.close()
    assert reactions.seen == [(SIGNAL, "signals", True)]


def test_a_signal_landing_while_the_main_thread_holds_a_lock_the_reaction_takes_does_not_deadlock():
    # The shape of the bug it fixes: the main thread inside Event.clear() holds the event's
    # lock when the handler, on that same thread, calls Event.set().
    lock = threading.Lock()
    reactions = Reactions(lock)
    relay = SignalRelay(reactions)
    relay.install([SIGNAL])
    try:
        with lock:
            os.kill(os.getpid(), SIGNAL)  # the handler has run once this returns
            assert not reactions.done.wait(0.2)  # the reaction waits for the lock...
        assert reactions.done.wait(5)  # ...and gets it once the main thread lets go
    finally:
        relay.close()
    assert reactions.seen == [(SIGNAL, "signals", True)]


def test_signals_reach_the_reaction_in_the_order_they_arrived():
    seen: list[int] = []
    relay = SignalRelay(seen.append)
    relay.install([SIGNAL, signal.SIGUSR1])
    try:
        for signum in (SIGNAL, signal.SIGUSR1, SIGNAL):
            os.kill(os.getpid(), signum)
    finally:
        relay.close()  # ends the thread after the signals already in the pipe
    assert seen == [SIGNAL, signal.SIGUSR1, SIGNAL]


def test_closing_the_relay_puts_back_the_handlers_it_replaced():
    def before(signum, frame):
        pass

    previous = signal.signal(SIGNAL, before)
    try:
        relay = SignalRelay(lambda signum: None)
        relay.install([SIGNAL])
        assert signal.getsignal(SIGNAL) is not before
        relay.close()
        assert signal.getsignal(SIGNAL) is before
    finally:
        signal.signal(SIGNAL, previous)
