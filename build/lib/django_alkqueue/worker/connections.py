"""Connection hygiene for long-lived worker threads.

Django's close_old_connections() closes every connection when CONN_MAX_AGE is 0 (the
default), which is right at the end of a web request but would make a worker reconnect for
every job. A worker is one long request: it keeps healthy connections, closes broken ones at
once, and honours CONN_MAX_AGE when it is set above 0.
"""

from __future__ import annotations

import threading

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper


def recycle_connections() -> None:
    """Check this thread's open connections (every alias it has used)."""
    for connection in connections.all(initialized_only=True):
        _recycle(connection)


class ThreadConnections:
    """recycle_connections() for threads that check after every job.

    Finding which aliases a thread has used goes through asgiref's thread-local lookup, an
    exception for each alias not yet used, about 2 us a time: a tenth of a draining worker's
    CPU per job. So each thread here takes its wrapper of every alias once (making one opens
    no connection) and checks those directly; Django keeps one wrapper per alias and thread
    for the thread's lifetime.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def recycle(self) -> None:
        wrappers: list[BaseDatabaseWrapper] | None = getattr(self._local, "wrappers", None)
        if wrappers is None:
            wrappers = self._local.wrappers = [connections[alias] for alias in connections]
        for connection in wrappers:
            _recycle(connection)


def _recycle(connection: BaseDatabaseWrapper) -> None:
    if connection.connection is None or connection.in_atomic_block:
        return
    if connection.settings_dict.get("CONN_MAX_AGE") == 0:
        if connection.errors_occurred:
            if connection.is_usable():
                connection.errors_occurred = False
            else:
                connection.close()
    else:
        connection.close_if_unusable_or_obsolete()


def ages_connections() -> bool:
    """Whether any alias sets CONN_MAX_AGE above 0 (or None): only then can a connection go
    stale while its thread waits for the next job. With 0 everywhere, the check after each
    job leaves nothing for a check before the next one to find."""
    return any(s.get("CONN_MAX_AGE", 0) != 0 for s in connections.settings.values())
