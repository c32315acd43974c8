"""Signal reactions on a thread of their own, never inside the signal handler.

Python runs a signal handler in the main thread between two bytecodes, possibly while that
thread holds a lock: inside `Event.clear()` or `Event.wait()` it holds the event's
non-reentrant lock, and a handler that then calls `Event.set()` on the same event waits for
itself forever. The handler installed here only writes the signal's number to a pipe (no
lock, async-signal-safe); a relay thread reads it and calls the reaction, which may then
take any lock, log, and set events.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

#: Written by `close` to end the relay thread; no signal has the number 0.
_CLOSE = 0


class SignalRelay:
    """Installs handlers for `signums` (main thread only) that hand each signal to `react`,
    called on the relay thread in arrival order. `close` restores the replaced handlers."""

    def __init__(self, react: Callable[[int], None]) -> None:
        self.react = react
        self._read, self._write = os.pipe()
        # A full pipe must not block the handler: 64 KiB of pending signals is already lost.
        os.set_blocking(self._write, False)
        self._replaced: dict[int, Any] = {}
        self._thread = threading.Thread(target=self._relay, name="signals", daemon=True)

    def install(self, signums: Iterable[int]) -> None:
        for signum in signums:
            self._replaced[signum] = signal.signal(signum, self._on_signal)
        self._thread.start()  # a signal before this waits in the pipe

    def close(self) -> None:
        for signum, handler in self._replaced.items():
            signal.signal(signum, handler)
        self._replaced.clear()
        if self._thread.is_alive():
            os.write(self._write, bytes([_CLOSE]))
            self._thread.join()
        os.close(self._read)
        os.close(self._write)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._write, bytes([signum]))

    def _relay(self) -> None:
        while (data := os.read(self._read, 1)) and data[0] != _CLOSE:
            self.react(data[0])
