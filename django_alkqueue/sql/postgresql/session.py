"""How the hot statements (enqueue, claim, ack, heartbeat) reach PostgreSQL.

Django's psycopg backend binds parameters on the client (`ClientCursor`) and keeps psycopg
from preparing statements, so the server parses and plans each call anew; for the claim,
planning costs more than running it. So the hot statements run on a `psycopg.RawCursor`
over Django's own connection (`connection.connection`), with server-side binding and
`execute(prepare=True)`. One such cursor is kept per psycopg connection and statement: a
psycopg cursor looks its parameter dumpers and result loaders up again whenever it runs
another statement than its last one, as a new cursor does. A raw cursor takes PostgreSQL's
own `$1` placeholders, so psycopg does not parse the statement's text on every call; the
statements are written once, with Django's `%s` and `%(name)s` (which its own cursor, below,
still runs), and numbered here once per statement (`raw_statement`). They share Django's
session and transaction, so `transaction.atomic()` and rollbacks apply exactly as to
`connection.cursor()`, and psycopg's errors are raised as Django's database exceptions.

Each hot statement still goes through Django's own cursor, with Django's documented
instrumentation (`connection.execute_wrapper()`): the raw cursor runs it in place of the
execution, as the innermost wrapper. So Django's checks before a query (the connection
opened, the health check CONN_HEALTH_CHECKS asks for, the connection being this thread's, no
event loop), its query log (`DEBUG = True`, `assertNumQueries`) and every execute wrapper
installed apply to the hot statements as to Django's own queries, with no reading of
Django's internals (docs/benchmarks.md, "The driver's hot path", has what this costs).

A prepared statement is still planned anew on every call while PostgreSQL expects a custom
plan to beat the generic one, and for the claim and the ack it always does. So those ask for
the generic plan (`generic_plan=True`): in autocommit the statement goes out in one pipeline
behind a `set_config()` local to that statement's own implicit transaction, which also pins
the plan's shape to index scans in nested loops (a generic plan guesses that LIMIT n keeps a
tenth of the table, and on a small table it keeps sequential scans as the table grows).
Inside the caller's transaction the settings would outlive the statement, so there the
statement runs as it is.

Nothing is prepared behind a pooler (`behind_a_pooler`): one in transaction mode hands each
transaction to whichever server connection is free, where psycopg's statement names are
missing or taken by another client (docs/worker.md, PgBouncer). Should a prepared statement
still go missing (a pooler that passes the server's process id on, a DEALLOCATE from
elsewhere), the statement is sent again unprepared in autocommit and its connection prepares
nothing more (one warning per connection); inside a transaction the refusal has aborted the
transaction and is raised.
"""

from __future__ import annotations

import datetime
import logging
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import django.db
import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper
from psycopg import errors
from psycopg.types.datetime import TimestamptzLoader

from ...conf import get_settings

Params = Sequence[Any] | dict[str, Any]
Rows = list[tuple[Any, ...]]

logger = logging.getLogger("django_alkqueue")

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
) -> Rows:
    """Run one hot statement and return its rows; `generic_plan`: see the module docstring."""

    def run(execute: Any, django_sql: str, django_params: Any, many: bool, context: Any) -> Rows:
        conn = connection.connection
        if not isinstance(conn, psycopg.Connection) or _logged_from_the_cursor(context):
            execute(django_sql, django_params, many, context)  # Django's cursor, unprepared
            return list(context["cursor"].fetchall())
        return _raw(connection, conn, sql, params, generic_plan)

    return _through_django(connection, sql, params, run)


def _raw(
    connection: BaseDatabaseWrapper,
    conn: psycopg.Connection[Any],
    sql: str,
    params: Params,
    generic_plan: bool,
) -> Rows:
    """The statement on this connection's kept raw cursor, prepared where it may be."""
    sql, params = _numbered(sql, params)
    zone = connection.timezone
    cursor = _kept_cursor(conn, zone, sql)
    plan = _kept_cursor(conn, zone, _GENERIC_PLAN) if generic_plan else None
    try:
        if not _may_prepare(connection, conn):
            return _unprepared(cursor, sql, params)
        try:
            return _prepared(conn, cursor, sql, params, plan)
        except psycopg.Error as exc:
            # Inside the caller's transaction the refusal has aborted it: nothing to rerun.
            if not (conn.autocommit and _lost_prepared_statement(exc)):
                raise
            rows = _unprepared(cursor, sql, params)  # its own error, if it has one
            _stop_preparing(conn, exc)
            return rows
    except psycopg.Error as exc:
        raise _django_error(connection, conn, exc) from exc


def _logged_from_the_cursor(context: Any) -> bool:
    """Whether Django logs this query (DEBUG, assertNumQueries) from what its own psycopg
    cursor ran: Django 5.2's PostgreSQL backend does (6.0 composes the text from the
    statement and its parameters), so there the statement runs on Django's cursor, as
    Django's own queries do, to be logged with its text."""
    return django.VERSION < (6, 0) and isinstance(context["cursor"], CursorDebugWrapper)


def _through_django(
    connection: BaseDatabaseWrapper, sql: str, params: Params, run: Callable[..., Rows]
) -> Rows:
    """`run` in place of the execution of `sql` by Django's own cursor, as the innermost
    execute wrapper (connection.execute_wrapper(), Django's documented instrumentation):
    Django's checks before a query (the connection open, CONN_HEALTH_CHECKS, this thread's
    own, no event loop), its query log (DEBUG, assertNumQueries) and the wrappers installed
    before this one all apply as to Django's own queries."""
    with connection.execute_wrapper(run), connection.cursor() as cursor:
        rows: Rows = cursor.execute(sql, params)
    return rows


def fetch_each(
    connection: BaseDatabaseWrapper, statements: Sequence[tuple[str, Params]]
) -> list[Rows]:
    """Run hot statements one after another inside the caller's transaction and return each
    one's rows. They go out in one pipeline, so they (and the BEGIN of the transaction the
    first one opens) take one round trip, not one each; the server still runs each after the
    one before has finished, on a snapshot of its own (READ COMMITTED). Where a statement
    cannot be prepared (a pooler, PREPARED_STATEMENTS off) they run one by one. Each still
    passes through Django's cursor (`_through_django`): the first sends them all, the others
    take their rows."""
    connection.ensure_connection()
    conn = connection.connection
    if (
        not isinstance(conn, psycopg.Connection)
        or not _may_prepare(connection, conn)
        or not psycopg.Pipeline.is_supported()
    ):
        return [fetch_all(connection, sql, params) for sql, params in statements]
    pending: list[Rows] = []

    def run(execute: Any, django_sql: str, django_params: Any, many: bool, context: Any) -> Rows:
        if _logged_from_the_cursor(context):
            execute(django_sql, django_params, many, context)  # Django's cursor, unprepared
            return list(context["cursor"].fetchall())
        if not pending:  # the first statement's turn: all of them go out
            pending.extend(reversed(_pipelined(connection, conn, statements)))
        return pending.pop()

    return [_through_django(connection, sql, params, run) for sql, params in statements]


def _pipelined(
    connection: BaseDatabaseWrapper,
    conn: psycopg.Connection[Any],
    statements: Sequence[tuple[str, Params]],
) -> list[Rows]:
    zone = connection.timezone
    cursors = []
    try:
        with conn.pipeline():
            for sql, params in statements:
                text, values = _numbered(sql, params)
                cursor = _kept_cursor(conn, zone, text)
                cursor.execute(text, values, prepare=True)
                cursors.append(cursor)
        return [cursor.fetchall() for cursor in cursors]
    except psycopg.Error as exc:
        raise _django_error(connection, conn, exc) from exc


def _django_error(
    connection: BaseDatabaseWrapper, conn: psycopg.Connection[Any], exc: psycopg.Error
) -> Exception:
    """What a hot statement's psycopg error raises. As Django does for its own queries'
    errors, a lost connection is not reused: outside a transaction the next statement
    connects anew."""
    if conn.broken:
        connection.close()
    return as_django_error(exc)


#: Each hot statement as raw_statement() numbers it, converted on its first call.
_RAW: dict[str, tuple[str, tuple[str, ...]]] = {}


def _numbered(sql: str, params: Params) -> tuple[str, Sequence[Any]]:
    raw = _RAW.get(sql)
    if raw is None:
        raw = _RAW[sql] = raw_statement(sql)
    text, names = raw
    if isinstance(params, dict):
        return text, [params[name] for name in names]
    return text, params


_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")


def raw_statement(sql: str) -> tuple[str, tuple[str, ...]]:
    """`sql` with its `%s` or `%(name)s` placeholders numbered `$1`, `$2` ... for a raw
    cursor, and the names in the order of their numbers (empty for `%s`): a name used twice
    takes one number. `%%` becomes `%`."""
    names: list[str] = []
    positional = 0

    def number(match: re.Match[str]) -> str:
        nonlocal positional
        name = match.group(1)
        if match.group(0) == "%%":
            return "%"
        if name is None:
            positional += 1
            return f"${positional}"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    text = _PLACEHOLDER.sub(number, sql)
    if names and positional:
        raise ValueError("a statement takes either %s or %(name)s placeholders, not both")
    return text, tuple(names)


def _prepared(
    conn: psycopg.Connection[Any],
    cursor: psycopg.RawCursor[tuple[Any, ...]],
    sql: str,
    params: Sequence[Any],
    plan: psycopg.RawCursor[tuple[Any, ...]] | None,
) -> Rows:
    """`plan`: the cursor that asks for the generic plan first, if the statement wants it."""
    if plan is not None and conn.autocommit and psycopg.Pipeline.is_supported():
        with conn.pipeline():
            plan.execute(_GENERIC_PLAN, prepare=True)
            cursor.execute(sql, params, prepare=True)
    else:
        cursor.execute(sql, params, prepare=True)
    return cursor.fetchall()


def _unprepared(
    cursor: psycopg.RawCursor[tuple[Any, ...]], sql: str, params: Sequence[Any]
) -> Rows:
    # prepare=False, not None: psycopg would otherwise use a statement it prepared before.
    cursor.execute(sql, params, prepare=False)
    return cursor.fetchall()


# Django's exception classes carry psycopg's names (PEP 249): the first match, most specific
# first, is the one Django itself would raise.
_PEP_249 = (
    "DataError", "OperationalError", "IntegrityError", "InternalError", "ProgrammingError",
    "NotSupportedError", "DatabaseError", "InterfaceError", "Error",
)  # fmt: skip


def as_django_error(exc: psycopg.Error) -> Exception:
    """`exc` as the exception of django.db that Django raises for it."""
    for name in _PEP_249:
        if isinstance(exc, getattr(psycopg, name)):
            error: Exception = getattr(django.db, name)(*exc.args)
            return error
    return django.db.Error(*exc.args)


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


#: The psycopg connections whose prepared statements went missing (see fetch_all).
_UNPREPARED: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()


def _stop_preparing(conn: psycopg.Connection[Any], exc: Exception) -> None:
    _UNPREPARED.add(conn)
    logger.warning(LOST_STATEMENT_WARNING, str(exc).strip())


#: Each psycopg connection's kept cursors, one per statement, and the time zone they read
#: timestamps in; an entry goes with its connection when Django closes or replaces it. Django
#: gives each thread its own connection, so a cursor is never shared between threads.
_KEPT: weakref.WeakKeyDictionary[
    psycopg.Connection[Any],
    tuple[dict[str, psycopg.RawCursor[tuple[Any, ...]]], datetime.tzinfo | None],
] = weakref.WeakKeyDictionary()


def _kept_cursor(
    conn: psycopg.Connection[Any], zone: datetime.tzinfo | None, sql: str
) -> psycopg.RawCursor[tuple[Any, ...]]:
    """The raw cursor of this psycopg connection for the statement `sql`, made once and
    reused. `zone` is Django's time zone for the connection (None: naive datetimes); cursors
    made for another one (USE_TZ changed, as tests do) are replaced, as Django's own cursors
    follow it."""
    kept = _KEPT.get(conn)
    if kept is None or kept[1] is not zone:
        kept = _KEPT[conn] = ({}, zone)
    cursor = kept[0].get(sql)
    if cursor is None or cursor.closed:
        cursor = kept[0][sql] = psycopg.RawCursor(conn)
        _read_timestamps_in(zone, cursor)
    return cursor


class _ZonedTimestamptzLoader(TimestamptzLoader):
    """timestamptz in a given zone, or naive (None), as Django's own cursors read them."""

    zone: datetime.tzinfo | None = None

    def load(self, data: Any) -> datetime.datetime:
        return super().load(data).replace(tzinfo=self.zone)


def _read_timestamps_in(zone: datetime.tzinfo | None, cursor: psycopg.Cursor[Any]) -> None:
    """timestamptz columns come back in `zone`, as from Django's cursors. Where that zone is
    UTC and so is the session's (USE_TZ = True), psycopg's own loader gives the same
    datetimes without the extra replace() per value."""
    if zone is datetime.UTC and cursor.connection.info.timezone is datetime.UTC:
        cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
    else:
        loader = type("ZonedLoader", (_ZonedTimestamptzLoader,), {"zone": zone})
        cursor.adapters.register_loader("timestamptz", loader)


def _may_prepare(connection: BaseDatabaseWrapper, conn: psycopg.Connection[Any]) -> bool:
    if not get_settings().PREPARED_STATEMENTS or conn in _UNPREPARED:
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
