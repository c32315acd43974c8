"""The hot statements' own prepared statements, run on psycopg's libpq connection.

In autocommit, a hot statement that needs no pinned plan (the enqueue of one job, above all)
skips psycopg's cursor: it is prepared once per connection under a name of the library's
(`_alkqueue_N`), and each call binds, runs and reads it with psycopg's own pieces (its
adapters, the libpq wrapper, its wait loop, which cancels the statement on Ctrl-C). A
cursor's execute() costs some thirty Python calls around the same libpq calls; between two
waits on the server, with this small machine's caches cold, they cost a single enqueue
about 30 us of its 350 to 450 (docs/benchmarks.md, the layer table; measured by hand,
taking turns, the client's CPU time per call fell below the raw ceiling's).

Only in autocommit, and outside a libpq pipeline: in a transaction psycopg must send its
BEGIN first, which its cursor does (sql/hot_cursor.py keeps that path).

psycopg sends DEALLOCATE ALL after a rollback (or a DROP or ALTER) when it holds prepared
statements of its own, which takes ours with it. A statement found missing is therefore
prepared again, once, before the loss counts as a lost statement (hot_cursor.py).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg
    from psycopg.pq.abc import PGresult

Row = tuple[Any, ...]

_PLACEHOLDER = re.compile(r"%(.)")


def numbered(sql: str) -> bytes:
    """`sql` with its `%s` placeholders as PostgreSQL's `$1, $2, ...` (and `%%` as `%`)."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match[1] == "%":
            return "%"
        if match[1] != "s":
            raise ValueError(f"only %s placeholders can be prepared here: {match[0]!r}")
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql).encode()


class Statements:
    """One connection's prepared statements of the library, by text and parameter types
    (a parameter of another type, NULL say, is another statement, as for psycopg), and
    the adapters the kept cursor reads and writes with (hot_cursor._kept_cursor)."""

    def __init__(self, cursor: psycopg.Cursor[Row]) -> None:
        from psycopg import errors, pq
        from psycopg.adapt import PyFormat, Transformer
        from psycopg.generators import execute

        self.transformer = Transformer(cursor)
        self.names: dict[tuple[str, tuple[int, ...]], bytes] = {}
        self._numbers = itertools.count()  # never a name twice, even after a DEALLOCATE ALL
        # psycopg's pieces, looked up once: an import statement per call would cost more
        # than the rest of this module's Python.
        self._auto = PyFormat.AUTO
        self._execute = execute
        self._failed = pq.ExecStatus.FATAL_ERROR
        self._error = errors.error_from_result
        self._missing = errors.InvalidSqlStatementName

    def fetch_all(
        self, conn: psycopg.Connection[Any], sql: str, params: Sequence[Any]
    ) -> list[Row]:
        """Run `sql` prepared, in autocommit, and return its rows as the kept cursor would."""
        tx = self.transformer
        values = tx.dump_sequence(params, [self._auto] * len(params))
        key = (sql, tuple(tx.types or ()))
        formats = tx.formats or []
        with conn.lock:
            try:
                result = self._run(conn, key, values, formats)
            except self._missing:
                self.names.clear()  # a DEALLOCATE ALL took every one of them
                result = self._run(conn, key, values, formats)
        tx.set_pgresult(result)
        return tx.load_rows(0, result.ntuples, tuple)

    def _run(
        self,
        conn: psycopg.Connection[Any],
        key: tuple[str, tuple[int, ...]],
        values: Sequence[Any],
        formats: Sequence[int],
    ) -> PGresult:
        pgconn = conn.pgconn
        name = self.names.get(key)
        if name is None:
            name = f"_alkqueue_{next(self._numbers)}".encode()
            pgconn.send_prepare(name, numbered(key[0]), param_types=key[1])
            self._result(conn, conn.wait(self._execute(pgconn)))
            self.names[key] = name
        pgconn.send_query_prepared(name, values, param_formats=formats)
        return self._result(conn, conn.wait(self._execute(pgconn)))

    def _result(self, conn: psycopg.Connection[Any], results: list[PGresult]) -> PGresult:
        """The one result of one statement; a failed one raised as psycopg raises it."""
        (result,) = results
        if result.status == self._failed:
            raise self._error(result, encoding=conn.info.encoding)
        return result
