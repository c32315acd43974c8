"""The worker's one event loop for `async def` handlers, in a thread of its own.

A handler thread that gets an async handler's job submits the coroutine to this loop and
waits for it, so `--concurrency` bounds the coroutines running at once exactly as it bounds
sync handlers, and the heartbeat service, the acker and the shutdown see an ordinary running job.
The loop starts with the first async job and stops with the worker.

No handler can end the loop (docs/reliability.md): a coroutine's SystemExit or
KeyboardInterrupt is caught inside the loop and raised again in the handler thread that
waits for it, where the executor treats it as a sync handler's; a handler that stops the
loop finds it running again at once; and should the loop's thread end all the same, every
handler thread waiting on it fails its job with `EventLoopDied`, and the next async job
starts a new loop.

Django's async ORM calls (`acreate`, `sync_to_async` with thread_sensitive) made by these
handlers run, as anywhere outside an ASGI request, in asgiref's one thread for sync work,
on that thread's own connection; `stop` closes it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

from ..exceptions import EventLoopDied

logger = logging.getLogger("django_alkqueue")

#: Seconds `stop` waits for the async ORM's thread to close its connections.
CLOSE_TIMEOUT = 5.0
#: Seconds between a waiting handler thread's checks that the loop's thread still lives.
ALIVE_EVERY = 0.5


async def contained(coroutine: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run `coroutine`, keeping whatever it raises, BaseExceptions included, off the loop:
    asyncio lets a task's SystemExit and KeyboardInterrupt out of `run_forever`."""
    try:
        return True, await coroutine
    except BaseException as error:  # raised again in the waiting handler thread
        return False, error


class _Running:
    """One loop and the thread that runs it, until `stopping` is set."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="alk-event-loop", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        """run_forever until the worker stops it: a handler's `loop.stop()` (or anything
        raised out of a callback) only costs the loop one restart."""
        while not self.stopping.is_set():
            try:
                self.loop.run_forever()
            except BaseException:  # a callback's SystemExit: the loop goes on
                logger.exception("the event loop of async handlers stopped on an error; "
                                 "starting it again")  # fmt: skip
                continue
            if not self.stopping.is_set():
                logger.warning("an async handler stopped the worker's event loop; "
                               "starting it again")  # fmt: skip

    def alive(self) -> bool:
        return self.thread.is_alive() and not self.loop.is_closed()


class EventLoopThread:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: _Running | None = None

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run `coroutine` on the loop; block the calling thread until it returns or raises.
        EventLoopDied when the loop's thread ended before it did."""
        running = self._started()
        try:
            future = asyncio.run_coroutine_threadsafe(contained(coroutine), running.loop)
        except RuntimeError as exc:  # closed between the check and the call
            coroutine.close()
            raise EventLoopDied(f"the event loop was closed: {exc}") from None
        while True:
            try:
                returned, value = future.result(timeout=ALIVE_EVERY)
                break
            except concurrent.futures.TimeoutError:
                if not running.alive():
                    future.cancel()
                    raise EventLoopDied("the event loop ended while the handler ran") from None
        if returned:
            return value
        raise value

    def stop(self) -> None:
        with self._lock:
            running, self._running = self._running, None
        if running is None:
            return
        running.stopping.set()
        if running.loop.is_closed() or not running.thread.is_alive():
            return
        loop = running.loop
        closing = asyncio.run_coroutine_threadsafe(sync_to_async(connections.close_all)(), loop)
        with suppress(Exception):  # a broken connection is closed all the same
            closing.result(timeout=CLOSE_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        running.thread.join()
        loop.close()

    def _started(self) -> _Running:
        """The live loop, started (again, when the last one ended) if need be."""
        with self._lock:
            if self._running is None or not self._running.alive():
                if self._running is not None:
                    logger.error("the event loop of async handlers ended; starting a new one")
                    self._running.stopping.set()
                self._running = _Running()
            return self._running
