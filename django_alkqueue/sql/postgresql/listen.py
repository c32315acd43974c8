"""LISTEN on a connection of its own, for the worker's wake-ups (PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper

from ..base import Notifications
from .session import as_django_error

T = TypeVar("T")


@contextmanager
def listening(
    connection: BaseDatabaseWrapper,
    channel: str,
    cancels: tuple[str, Callable[[int], object]] | None = None,
) -> Iterator[Notifications]:
    """A new session with `connection`'s settings, LISTENing on `channel`; yields a function
    that waits up to `timeout` seconds and returns the payloads (queue names) as soon as
    some came: the packet that brings the first one, not everything until the timeout.
    With `cancels` (a worker's cancel channel and a callback) it LISTENs there too, and
    passes each job id cancelled to the callback as it comes.
    Not Django's connection: a LISTEN lasts the session, which Django may close or pool."""
    conn = _django_errors(lambda: connection.get_new_connection(connection.get_connection_params()))
    try:
        conn.autocommit = True
        _django_errors(lambda: conn.execute(f"LISTEN {channel}"))
        if cancels is not None:
            _django_errors(lambda: conn.execute(f"LISTEN {cancels[0]}"))

        def wait(timeout: float) -> list[str]:
            notices = _django_errors(lambda: list(conn.notifies(timeout=timeout, stop_after=1)))
            woken = []
            for notice in notices:
                if notice.channel == channel:
                    woken.append(notice.payload)
                elif cancels is not None and notice.payload.isdigit():
                    cancels[1](int(notice.payload))
            return woken

        yield wait
    finally:
        conn.close()


def _django_errors(call: Callable[[], T]) -> T:  # noqa: UP047
    """`call()`, its driver errors raised as Django's: this session is the driver's own, which
    Django's error wrapper never sees, and the worker backs off on Django's errors only."""
    try:
        return call()
    except psycopg.Error as exc:
        raise as_django_error(exc) from exc
