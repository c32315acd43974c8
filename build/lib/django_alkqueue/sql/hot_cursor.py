"""How the hot statements (enqueue, claim, ack, heartbeat) reach PostgreSQL.

Django's psycopg backend binds parameters on the client (`ClientCursor`) and turns prepared
statements off: every call formats the whole statement in Python, and the server parses
and plans it anew. The claim is a large statement run thousands of times a second, and on
a small machine planning it costs more than running it. So the hot statements go through a
plain psycopg cursor on the same connection (one per connection, kept), with server-side
binding, prepared on first use (ALKQUEUE["PREPARED_STATEMENTS"], default on; an explicit
`OPTIONS["prepare_threshold"] = None` on the alias also keeps them unprepared). They run in
the same session and transaction as Django's queries, so `transaction.atomic()` and
rollbacks apply exactly as with `connection.cursor()`, and errors come back as Django's
database exceptions.

Being prepared saves the parsing, not always the planning: PostgreSQL plans a prepared
statement anew on every call for as long as a generic plan looks costlier than the custom
ones, and for the claim (its LIMIT and its `now` bound) and the ack (arrays of unknown length)
it always does. Planning the claim took longer than running it: without it, a claim+ack of one
job went from about 1.05 to 0.7 ms here. So the claim, the ack and the lease renewal ask for
the generic plan (`generic_plan=True`): in autocommit the statement goes out in one pipeline,
one round trip, behind a set_config() that lasts only for that statement's own implicit
transaction. The settings also pin the plan's shape to index scans joined by nested loops.
A generic plan guesses that LIMIT n keeps a tenth of the table, and is made once per
connection and kept until the table's statistics change; left free, on a table of 10,000
rows it hashed the whole primary key to claim one job, and on a small one it chose sequential
scans that it would keep as the table grew. These statements touch a handful of rows by index,
so that shape is right at every size. (The renewal ran on a generic plan already; it asks for
the pinned shape.) Inside the caller's transaction the settings would outlive the statement,
so there the statement runs as it is (custom plans).

In autocommit, a statement that needs no pinned plan (the enqueue of one job) skips the
kept cursor too: sql/prepared.py prepares it under a name of the library's and runs it on
psycopg's libpq connection, without the cursor's thirty-odd Python calls. In a transaction
the cursor runs it, as psycopg must send its BEGIN first.

Behind a pooler (`behind_a_pooler`) nothing is prepared. One in transaction mode that cannot
keep prepared statements (PgBouncer before 1.21, or without max_prepared_statements) hands
each transaction to whichever server connection is free, where psycopg's statement names
(`_pg3_0`, ...) are missing or taken by another client's; and through PgBouncer 1.18 two
workers preparing their statements stalled in 5 of about 150 drains, its one server
connection idle while clients waited for it (docs/worker.md, PgBouncer).

Should a prepared statement still go missing (a pooler that passes the server's process id
on, a DEALLOCATE from elsewhere), the server refuses the statement before it runs anything:
in autocommit it is sent again, unprepared, and its connection prepares nothing more (a
warning says so, once per connection); inside the caller's transaction the refusal is
raised, as it has aborted the transaction. A name taken by one of our other hot statements
is refused too: no two of them take parameters of the same count and types.

Django's own cursor is kept wherever something watches the queries: when queries are logged
(`DEBUG = True`, `assertNumQueries`, the debug toolbar), when an execute wrapper is
installed (`connection.execute_wrapper`), and with psycopg2.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import get_settings
from .prepared import Statements

if TYPE_CHECKING:
    import psycopg

Params = Sequence[Any] | dict[str, Any]

logger = logging.getLogger("django_alkqueue")


@functools.cache
def _is_psycopg3() -> bool:
    # Imported on first use: Django's psycopg helpers import psycopg2 when psycopg is missing,
    # and a project on SQLite or MariaDB has neither.
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


# Django opens psycopg connections with prepare_threshold=None, and psycopg then refuses even
# an explicit prepare=True. A threshold no statement reaches keeps automatic preparation off
# for Django's own queries while the hot statements ask for it by name.
_ONLY_WHEN_ASKED = 2**62


#: The planner settings a `generic_plan` statement runs under (see the module docstring).
PINNED_PLAN_SETTINGS = {
    "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off",
    "enable_bitmapscan": "off",
    "enable_hashjoin": "off",
    "enable_mergejoin": "off",
}

# Local to the implicit transaction of the pipeline that sends it (`is_local` true).
_GENERIC_PLAN = "SELECT " + ", ".join(
    f"set_config('{name}', '{value}', true)" for name, value in PINNED_PLAN_SETTINGS.items()
)


def fetch_all(
    connection: BaseDatabaseWrapper, sql: str, params: Params, *, generic_plan: bool = False
) -> list[tuple[Any, ...]]:
    """Run one hot statement and return its rows; `generic_plan`: see the module docstring."""
    if not _is_psycopg3() or connection.queries_logged or connection.execute_wrappers:
        with connection.cursor() as django_cursor:
            django_cursor.execute(sql, params)
            return list(django_cursor.fetchall())
    ready(connection)
    with connection.wrap_database_errors:
        conn = connection.connection
        cursor, statements = _kept_cursor(conn, connection.timezone)
        if _may_prepare(connection):
            try:
                if conn.autocommit and generic_plan and _pipelines():
                    with conn.pipeline():
                        cursor.execute(_GENERIC_PLAN, prepare=True)
                        cursor.execute(sql, params, prepare=True)
                elif conn.autocommit and not (
                    isinstance(params, dict) or conn.pgconn.pipeline_status
                ):
                    return statements.fetch_all(conn, sql, params)
                else:  # in a transaction, after the BEGIN that psycopg owes it
                    cursor.execute(sql, params, prepare=True)
                return cursor.fetchall()
            except Exception as exc:
                # Inside the caller's transaction the refusal has aborted it: nothing to rerun.
                if not (conn.autocommit and _lost_prepared_statement(exc)):
                    raise
                rows = _unprepared(cursor, sql, params)  # its own error, if it has one
                _stop_preparing(conn, exc)
                return rows
        return _unprepared(cursor, sql, params)


def ready(connection: BaseDatabaseWrapper) -> None:
    """The checks `connection.cursor()` runs before it makes a cursor, without the cursor:
    the connection open and, where CONN_HEALTH_CHECKS asks, healthy; not used from a running
    event loop (SynchronousOnlyOperation); this thread's. On an open connection Django's
    `ensure_connection()` does nothing but the event-loop check, which raises and catches
    asyncio's RuntimeError on every call; asking asyncio for the running loop directly
    raises nothing. A single enqueue runs this between two waits on the server, with its
    caches cold: by hand, the bench's hot-path layer took about 3 us less per call."""
    # Django 4.1's health-check flags, which django-stubs does not declare.
    enabled: bool = connection.health_check_enabled  # type: ignore[attr-defined]
    if connection.connection is None or (enabled and not connection.health_check_done):  # type: ignore[attr-defined]
        connection.close_if_health_check_failed()
        connection.ensure_connection()
    elif asyncio.events._get_running_loop() is not None:
        connection.ensure_connection()  # SynchronousOnlyOperation, unless DJANGO_ALLOW_ASYNC_UNSAFE
    connection.validate_thread_sharing()


def _unprepared(
    cursor: psycopg.Cursor[tuple[Any, ...]], sql: str, params: Params
) -> list[tuple[Any, ...]]:
    # prepare=False, not None: psycopg would otherwise use a statement it prepared before.
    cursor.execute(sql, params, prepare=False)
    return cursor.fetchall()


#: Logged, once per connection, when a prepared statement was missing from the server
#: connection, its name already taken there, or bound to another statement, and the statement
#: then ran unprepared.
LOST_STATEMENT_WARNING = (
    "PostgreSQL: %s. A prepared statement went missing on this connection (behind a pooler"
    " in transaction mode that passes the server's process id on, or after a DEALLOCATE"
    " from elsewhere?). The statement ran again unprepared, and this connection prepares"
    ' nothing from now on. ALKQUEUE["PREPARED_STATEMENTS"] = False prepares nothing'
    " anywhere: docs/worker.md, PgBouncer."
)


def _lost_prepared_statement(exc: Exception) -> bool:
    from psycopg import errors

    return isinstance(
        exc,
        errors.DuplicatePreparedStatement  # 42P05: the name is taken on this server connection
        | errors.InvalidSqlStatementName  # 26000: not prepared on this server connection
        # The name holds another statement there: 08P01 when it takes another number of
        # parameters, a data exception (class 22) when their types differ. A data exception
        # of the statement's own comes back from the unprepared run too, and is raised.
        | errors.ProtocolViolation
        | errors.DataError,
    )


#: Set on a psycopg connection whose prepared statements went missing (see fetch_all).
_UNPREPARED = "_alkqueue_unprepared"


def _stop_preparing(conn: psycopg.Connection[Any], exc: Exception) -> None:
    setattr(conn, _UNPREPARED, True)
    logger.warning(LOST_STATEMENT_WARNING, str(exc).strip())


def _pipelines() -> bool:
    """Whether libpq can pipeline (version 14 and later)."""
    import psycopg

    return psycopg.Pipeline.is_supported()


#: Where a psycopg connection keeps its hot cursor (an attribute of that connection object,
#: so it goes when Django closes or replaces the connection).
_KEPT = "_alkqueue_hot_cursor"


def _kept_cursor(
    conn: psycopg.Connection[Any], zone: datetime.tzinfo | None
) -> tuple[psycopg.Cursor[tuple[Any, ...]], Statements]:
    """The plain cursor of this psycopg connection, made once and reused. It shares Django's
    connection, its session and its type adapters. A new cursor starts with an empty cache of
    parameter dumpers: looking them up again cost a single-row enqueue about 35 us of client
    CPU, a tenth of its time. Django gives each thread its own connection, so the cursor is
    never shared between threads. `zone` is Django's time zone for the connection (None:
    naive datetimes); a cursor made for another one (USE_TZ changed, as tests do) is
    replaced, as Django's own cursors follow it."""
    kept = getattr(conn, _KEPT, None)
    if kept is not None and not kept[0].closed and kept[1] is zone:
        return kept[0], kept[2]
    import psycopg

    cursor: psycopg.Cursor[tuple[Any, ...]] = psycopg.Cursor(conn)
    _read_timestamps_in(zone, cursor)
    statements = Statements(cursor)
    setattr(conn, _KEPT, (cursor, zone, statements))
    return cursor, statements


def _read_timestamps_in(zone: datetime.tzinfo | None, cursor: psycopg.Cursor[Any]) -> None:
    """timestamptz columns come back in `zone`, as from Django's cursors. Where that zone is
    UTC and so is the session's (USE_TZ = True: Django sets the session to UTC), psycopg's
    own loader (C) gives the same datetimes as Django's, which parses in Python and then sets
    its zone on the result: a claim reads four timestamps per job, and Django's loader was a
    tenth of a draining worker's time."""
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.types.datetime import TimestamptzLoader

    if zone is datetime.UTC and cursor.connection.info.timezone is datetime.UTC:
        cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
    else:
        register_tzloader(zone, cursor)


def _may_prepare(connection: BaseDatabaseWrapper) -> bool:
    conn = connection.connection
    if not get_settings().PREPARED_STATEMENTS or getattr(conn, _UNPREPARED, False):
        return False
    if behind_a_pooler(connection):
        return False
    if conn.prepare_threshold is None:
        if "prepare_threshold" in connection.settings_dict.get("OPTIONS", {}):
            return False  # switched off on purpose for this alias
        conn.prepare_threshold = _ONLY_WHEN_ASKED
    return True


#: Per database alias: whether a pooler sits between this process and PostgreSQL. Learnt
#: once per process, on the alias's first hot statement; where a connection goes is settled
#: by the alias's settings.
_POOLED: dict[str, bool] = {}


def behind_a_pooler(connection: BaseDatabaseWrapper) -> bool:
    """Whether the connection reaches PostgreSQL through a pooler (PgBouncer, Odyssey,
    PgCat, RDS Proxy...). A pooler answers the client's start-up with a backend key of its
    own, since it must route cancel requests itself, so the process id that psycopg was given
    at connect is not the one of the server process that runs the statements."""
    pooled = _POOLED.get(connection.alias)
    if pooled is None:
        conn = connection.connection
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()", prepare=False)
            row = cursor.fetchone()
        pooled = _POOLED[connection.alias] = row is None or row[0] != conn.info.backend_pid
    return pooled
