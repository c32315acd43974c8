"""LISTEN on a connection of its own, for the worker's wake-ups (PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper

from ..base import Notifications


@contextmanager
def listening(connection: BaseDatabaseWrapper, channel: str) -> Iterator[Notifications]:
    """A new session with `connection`'s settings, LISTENing on `channel`; yields a function
    that waits up to `timeout` seconds and returns the payloads (queue names) that came.
    Not Django's connection: a LISTEN lasts the session, which Django may close or pool."""
    conn = connection.get_new_connection(connection.get_connection_params())
    try:
        conn.autocommit = True
        conn.execute(f"LISTEN {channel}")

        def wait(timeout: float) -> list[str]:
            # Called outside this generator's frame too (a service keeps the session open
            # between ticks), so it translates the driver's errors itself.
            try:
                return [notify.payload for notify in conn.notifies(timeout=timeout)]
            except psycopg.Error as exc:
                from .session import as_django_error

                raise as_django_error(exc) from exc

        yield wait
    except psycopg.Error as exc:
        from .session import as_django_error

        raise as_django_error(exc) from exc
    finally:
        conn.close()
