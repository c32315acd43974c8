"""Connection hygiene for long-lived worker threads.

Django's close_old_connections() closes every connection when CONN_MAX_AGE is 0 (the
default), which is right at the end of a web request but would make a worker reconnect for
every job. A worker is one long request: it keeps healthy connections, closes broken ones at
once, and honours CONN_MAX_AGE when it is set above 0.

Which connections may be broken is learnt with Django's documented instrumentation: each
worker thread keeps an execute wrapper (`connection.execute_wrapper()`) on each of its
connections that notes a database error, as Django notes one for close_if_unusable_or_obsolete()
(a data or integrity error says nothing about the session). A connection with an error since
its last check is asked `is_usable()`, and closed if it is not; the others cost no round trip.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, DataError, IntegrityError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..exceptions import TransactionLeftOpen

logger = logging.getLogger("django_alkqueue")

#: A connection's transaction state: its atomic blocks' depth, and whether autocommit is on.
State = tuple[int, bool]


class _ErrorNote:
    """The execute wrapper that notes a database error on one connection since its last
    check. One per connection wrapper, installed once for the wrapper's lifetime: it keeps
    its own execute_wrapper() context (the connection's wrappers keep it), so the context is
    never closed while the connection lives. Closed by the garbage collector, as the context
    of a ThreadConnections that was dropped was, it would pop whatever wrapper was last on
    the connection at that moment (execute_wrapper() pops the last one), the hot statements'
    own included (sql/postgresql/session.py)."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.failed = False
        self._installed = connection.execute_wrapper(self)
        self._installed.__enter__()

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        try:
            return execute(sql, params, many, context)
        except (DataError, IntegrityError):
            raise
        except DatabaseError:
            self.failed = True
            raise


#: The note of each connection wrapper, by id, for as long as the wrapper (which holds it) lives.
_NOTES: weakref.WeakValueDictionary[int, _ErrorNote] = weakref.WeakValueDictionary()


def _note_of(connection: BaseDatabaseWrapper) -> _ErrorNote:
    note = _NOTES.get(id(connection))
    if note is None:
        note = _NOTES[id(connection)] = _ErrorNote(connection)
    return note


class ThreadConnections:
    """Each thread's connections, watched from the thread's first call here (`watch()` or
    `recycle()`; the thread that makes it at once), and checked after every job
    (`recycle()`).

    Finding which aliases a thread has used goes through asgiref's thread-local lookup, an
    exception for each alias not yet used, about 2 us a time: a tenth of a draining worker's
    CPU per job. So each thread here takes its wrapper of every alias once (making one opens
    no connection) and checks those directly; Django keeps one wrapper per alias and thread
    for the thread's lifetime.
    """

    def __init__(self, *, watch: bool = True) -> None:
        self._local = threading.local()
        if watch:
            self.watch()

    def watch(self) -> None:
        """Start watching this thread's connections, before its first job."""
        self._watched()

    def wrappers(self) -> list[BaseDatabaseWrapper]:
        """This thread's wrapper of every alias."""
        wrappers: list[BaseDatabaseWrapper] | None = getattr(self._local, "wrappers", None)
        if wrappers is None:
            wrappers = self._local.wrappers = [connections[alias] for alias in connections]
        return wrappers

    def recycle(self) -> None:
        """Close this thread's broken connections, and those CONN_MAX_AGE says are obsolete."""
        for connection, note in zip(self.wrappers(), self._watched(), strict=True):
            if _recycle(connection, note.failed):
                note.failed = False

    def _watched(self) -> list[_ErrorNote]:
        notes: list[_ErrorNote] | None = getattr(self._local, "notes", None)
        if notes is None:
            notes = self._local.notes = [_note_of(c) for c in self.wrappers()]
        return notes

    def states(self) -> list[State]:
        """The transaction state of each of this thread's connections, before a handler."""
        # transaction_state() inline: this runs twice per handler call.
        return [(len(c.atomic_blocks), c.connection is None or c.autocommit)
                for c in self.wrappers()]  # fmt: skip

    def restore(self, before: Sequence[State], error: BaseException | None = None) -> None:
        """After a handler: put each connection back in its state `before` it, as Django's
        request cycle does after a view. Raises TransactionLeftOpen (from the handler's
        `error`, if it raised) naming what was left open; it was rolled back."""
        if self.states() == before:  # the common case, in well under a microsecond
            return
        left = [
            left_open
            for connection, state in zip(self.wrappers(), before, strict=True)
            if (left_open := restore_transaction(connection, state)) is not None
        ]
        if left:
            raise TransactionLeftOpen(
                "the handler left a transaction open: " + "; ".join(left) + "; it was rolled back"
            ) from error


def transaction_state(connection: BaseDatabaseWrapper) -> State:
    """How many atomic blocks `connection` is in, and whether autocommit is on (a connection
    not open yet has it on: Django turns it on for every new one). The wrapper's attribute,
    not get_autocommit(), whose connection check cost a handler call 4 us."""
    autocommit = connection.connection is None or connection.autocommit
    return len(connection.atomic_blocks), autocommit


def restore_transaction(connection: BaseDatabaseWrapper, before: State) -> str | None:
    """Roll back the atomic blocks entered since `before` and never exited, then turn
    autocommit back on if `before` had it; a connection that cannot be put back is closed.
    Returns what was left open (for the error), None when nothing was."""
    after = transaction_state(connection)
    if after == before:
        return None
    depth, autocommit = before
    if after[0] > depth:
        left = f"{after[0] - depth} atomic block(s) entered and not exited"
    elif after[0] < depth:
        left = "an atomic block exited that it did not enter"
    else:
        left = "autocommit turned off"
    left += f" on database {connection.alias!r}"
    try:
        _unwind(connection, depth, autocommit)
    except DatabaseError as exc:
        logger.warning("a connection a handler left in a transaction could not be rolled "
                       "back (%s); closing it", exc)  # fmt: skip
        connection.close()
        _unwind(connection, depth, autocommit)  # a closed connection's blocks just end
    return left


def _unwind(connection: BaseDatabaseWrapper, depth: int, autocommit: bool) -> None:
    while len(connection.atomic_blocks) > depth:
        # What `with atomic():` does when its block raises: roll back to the block's
        # savepoint, or roll back the transaction when it is the outermost one.
        transaction.atomic(using=connection.alias).__exit__(
            TransactionLeftOpen, TransactionLeftOpen(), None
        )
    if autocommit and not connection.in_atomic_block and not transaction_state(connection)[1]:
        connection.rollback()
        connection.set_autocommit(True)


_THREADS = ThreadConnections(watch=False)  # the importing thread may be any


def watch_connections() -> None:
    """ThreadConnections.watch() for the calling thread (a service loop, a child process)."""
    _THREADS.watch()


def recycle_connections() -> None:
    """ThreadConnections.recycle() for the calling thread."""
    _THREADS.recycle()


def _recycle(connection: BaseDatabaseWrapper, failed: bool) -> bool:
    """Check one connection; False when it cannot be yet (inside a transaction)."""
    if connection.in_atomic_block:
        return False
    if connection.connection is None:
        return True
    if connection.settings_dict.get("CONN_MAX_AGE") == 0:
        # Django's close_if_unusable_or_obsolete() would close it: CONN_MAX_AGE 0 ends a
        # connection with its request. A connection is kept unless it failed and is unusable.
        if failed and not connection.is_usable():
            connection.close()
    else:
        connection.close_if_unusable_or_obsolete()
    return True


def ages_connections() -> bool:
    """Whether any alias sets CONN_MAX_AGE above 0 (or None): only then can a connection go
    stale while its thread waits for the next job. With 0 everywhere, the check after each
    job leaves nothing for a check before the next one to find."""
    return any(s.get("CONN_MAX_AGE", 0) != 0 for s in connections.settings.values())
