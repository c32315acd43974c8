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

Django's own cursor is kept wherever something watches the queries: when queries are logged
(`DEBUG = True`, `assertNumQueries`, the debug toolbar), when an execute wrapper is
installed (`connection.execute_wrapper`), and with psycopg2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.psycopg_any import is_psycopg3

from ..conf import get_settings

if TYPE_CHECKING:
    import psycopg

Params = Sequence[Any] | dict[str, Any]

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
    if not is_psycopg3 or connection.queries_logged or connection.execute_wrappers:
        with connection.cursor() as django_cursor:
            django_cursor.execute(sql, params)
            return list(django_cursor.fetchall())
    # The checks connection.cursor() runs first, without building a cursor left unused.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    prepare = True if _may_prepare(connection) else None
    with connection.wrap_database_errors:
        conn = connection.connection
        cursor = _kept_cursor(conn)
        try:
            if generic_plan and prepare and conn.autocommit and _pipelines():
                with conn.pipeline():
                    cursor.execute(_GENERIC_PLAN, prepare=True)
                    cursor.execute(sql, params, prepare=True)
            else:
                cursor.execute(sql, params, prepare=prepare)
        except Exception as exc:
            if prepare and _lost_prepared_statement(exc):
                raise type(exc)(f"{exc}{POOLER_HINT}") from exc
            raise
        return cursor.fetchall()


#: Appended to the error when a prepared statement was missing from the server connection,
#: or its name already taken there: what a transaction-mode pooler that cannot keep prepared
#: statements does, as it hands each transaction to whichever server connection is free.
POOLER_HINT = (
    " (behind a pooler in transaction mode that cannot keep prepared statements, such as"
    ' PgBouncer before 1.21? Set ALKQUEUE["PREPARED_STATEMENTS"] = False: docs/worker.md,'
    " PgBouncer)"
)


def _lost_prepared_statement(exc: Exception) -> bool:
    from psycopg import errors

    return isinstance(exc, errors.DuplicatePreparedStatement | errors.InvalidSqlStatementName)


def _pipelines() -> bool:
    """Whether libpq can pipeline (version 14 and later)."""
    import psycopg

    return psycopg.Pipeline.is_supported()


#: Where a psycopg connection keeps its hot cursor (an attribute of that connection object,
#: so it goes when Django closes or replaces the connection).
_KEPT = "_alkqueue_hot_cursor"


def _kept_cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[tuple[Any, ...]]:
    """The plain cursor of this psycopg connection, made once and reused. It shares Django's
    connection, its session and its type adapters. A new cursor starts with an empty cache of
    parameter dumpers: looking them up again cost a single-row enqueue about 35 us of client
    CPU, a tenth of its time. Django gives each thread its own connection, so the cursor is
    never shared between threads."""
    cursor: psycopg.Cursor[tuple[Any, ...]] | None = getattr(conn, _KEPT, None)
    if cursor is None or cursor.closed:
        import psycopg

        cursor = psycopg.Cursor(conn)
        setattr(conn, _KEPT, cursor)
    return cursor


def _may_prepare(connection: BaseDatabaseWrapper) -> bool:
    if not get_settings().PREPARED_STATEMENTS:
        return False
    conn = connection.connection
    if conn.prepare_threshold is None:
        if "prepare_threshold" in connection.settings_dict.get("OPTIONS", {}):
            return False  # switched off on purpose for this alias
        conn.prepare_threshold = _ONLY_WHEN_ASKED
    return True
