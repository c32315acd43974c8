"""LISTEN on a connection of its own, for the worker's wake-ups (PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

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
    conn = _django_errors(lambda: psycopg.connect(autocommit=True, **connect_kwargs(connection)))
    try:
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


#: OPTIONS that Django's PostgreSQL backend reads itself (docs/ref/databases, "PostgreSQL
#: notes") rather than pass to libpq: they mean nothing to a LISTEN session.
_DJANGO_OPTIONS = frozenset({"isolation_level", "server_side_binding", "assume_role", "pool"})
#: The DATABASES keys that name the server, and libpq's name for each.
_LIBPQ_KEYS = (("NAME", "dbname"), ("USER", "user"), ("PASSWORD", "password"),
               ("HOST", "host"), ("PORT", "port"))  # fmt: skip


def connect_kwargs(connection: BaseDatabaseWrapper) -> dict[str, Any]:
    """psycopg.connect()'s keywords for the database `connection`'s DATABASES entry names:
    its NAME, USER, PASSWORD, HOST and PORT where set, and its OPTIONS (libpq's parameters:
    `service`, `sslmode`, `application_name` ...) but those Django keeps for itself."""
    settings = connection.settings_dict
    kwargs = {k: v for k, v in settings.get("OPTIONS", {}).items() if k not in _DJANGO_OPTIONS}
    for key, libpq in _LIBPQ_KEYS:
        if settings.get(key):
            kwargs[libpq] = settings[key]
    return kwargs


def _django_errors(call: Callable[[], T]) -> T:  # noqa: UP047
    """`call()`, its driver errors raised as Django's: this session is the driver's own, which
    Django's error wrapper never sees, and the worker backs off on Django's errors only."""
    try:
        return call()
    except psycopg.Error as exc:
        raise as_django_error(exc) from exc
