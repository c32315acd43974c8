"""The worker's one event loop for `async def` handlers, in a thread of its own.

A handler thread that gets an async handler's job submits the coroutine to this loop and
waits for it, so `--concurrency` bounds the coroutines running at once exactly as it bounds
sync handlers, and the lease keeper, the acker and the shutdown see an ordinary running job.
The loop starts with the first async job and stops with the worker.

Django's async ORM calls (`acreate`, `sync_to_async` with thread_sensitive) made by these
handlers run, as anywhere outside an ASGI request, in asgiref's one thread for sync work,
on that thread's own connection; `stop` closes it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from contextlib import suppress
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections

#: Seconds `stop` waits for the async ORM's thread to close its connections.
CLOSE_TIMEOUT = 5.0


class EventLoopThread:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run `coroutine` on the loop; block the calling thread until it returns or raises."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._started()).result()

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        closing = asyncio.run_coroutine_threadsafe(sync_to_async(connections.close_all)(), loop)
        with suppress(Exception):  # a broken connection is closed all the same
            closing.result(timeout=CLOSE_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="alk-event-loop", daemon=True
                )
                self._thread.start()
                self._loop = loop
            return self._loop
