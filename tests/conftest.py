from __future__ import annotations

import importlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import override_settings
from django.utils import translation

from django_alkqueue import queue
from django_alkqueue.consumers import registry
from django_alkqueue.queues import Queue
from django_alkqueue.sql.postgresql import wake_pacing
from django_alkqueue.sql.postgresql.session import PINNED_PLAN_SETTINGS
from tests.admin_helpers import Seeded, client_for, make_user, seed
from tests.clocks import FakeClock

# A suite started as a background job of a shell without job control (`make test &` in a
# script) starts with SIGINT ignored, and every process it starts inherits that: the tests
# that end a command or a worker with Ctrl-C would wait in vain. A handler, unlike "ignored",
# is reset to the default at each child's exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config: pytest.Config) -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    dialect = settings.ALKQUEUE.get("DIALECT", "auto")
    return f"database: {_engine()} {db.get('HOST') or db['NAME']}, dialect {dialect}"


def _engine() -> str:
    from django.conf import settings

    return str(settings.DATABASES["default"]["ENGINE"]).rsplit(".", 1)[-1]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "seed(pending=3, dead=2): the size of the `seeded` admin fixture's database"
    )
    # The tests' users need no strong hashes: Django's PBKDF2 costs about half a second of
    # CPU a user, which the admin tests paid hundreds of times a run (Django's testing docs,
    # "Speeding up the tests"). The worker subprocesses hash no passwords.
    override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]).enable()
    if _engine() == "postgresql":
        _flush_postgresql_tables_with_rows()


def _flush_postgresql_tables_with_rows() -> None:
    """After each transactional test Django empties every table. On PostgreSQL it does so with
    one TRUNCATE of all 34 tables, which gives each table and each of its 100 indexes a new
    file and waits for every other session's lock on them: about a second a test. Only the
    tables that hold rows are truncated here (with CASCADE, for the empty tables that refer
    to them): a table a test never wrote keeps its file, and every table truncated starts
    with no statistics, as the plan tests expect. A flush that resets sequences keeps
    Django's own."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(
        self: DatabaseOperations,
        style: Any,
        tables: Any,
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        names = sorted(tables)
        with self.connection.cursor() as cursor:
            cursor.execute(
                " UNION ALL ".join(
                    f"SELECT %s WHERE EXISTS (SELECT 1 FROM {self.quote_name(name)})"
                    for name in names
                ),
                names,
            )
            filled = [row[0] for row in cursor.fetchall()]
        return truncate(self, style, filled, allow_cascade=True) if filled else []

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from django.conf import settings

    engine = _engine()
    forced_orm = settings.ALKQUEUE.get("DIALECT", "auto") == "orm"
    skips = {
        # Needs PostgreSQL and its own dialect (NOTIFY, prepared statements, COPY, catalog).
        "postgres_only": (engine != "postgresql" or forced_orm,
                          f"PostgreSQL-dialect behaviour; this run is on {engine}"
                          + (" with the ORM dialect" if forced_orm else "")),
        # Needs row locks and writers that do not wait for each other: several worker
        # processes at once (PostgreSQL, MariaDB, and the ORM dialect there); SQLite has one
        # writer at a time.
        "row_locks": (engine == "sqlite3",
                      "needs row locks and concurrent writers; SQLite has one writer at a time"),
        # Needs SQLite and its own dialect's statements.
        "sqlite_only": (engine != "sqlite3" or forced_orm,
                        f"SQLite-dialect behaviour; this run is on {engine}"
                        + (" with the ORM dialect" if forced_orm else "")),
    }  # fmt: skip
    for item in items:
        if "serial" in item.keywords and "postgres_only" not in item.keywords:
            # make test-sqlite and test-mariadb run no serial test (the Makefile's run_parallel)
            raise pytest.UsageError(f"{item.nodeid} is marked serial, not postgres_only")
        for marker, (skipped, reason) in skips.items():
            if skipped and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
    # The longest tests first: run in parallel (make test), one started last would be the
    # suite's tail, run alone while the other processes sit idle.
    items.sort(key=lambda item: "slow" not in item.keywords)


@pytest.fixture(autouse=True)
def no_notify_sent_yet() -> None:
    """Each test starts with no NOTIFY sent on this thread's connection: the time of the last
    one is kept per Django connection object, which outlives a test (wake_pacing.py)."""
    wake_pacing.forget(connections["default"])


@pytest.fixture(autouse=True)
def default_language() -> Iterator[None]:
    """Each test ends in the default language: a request the test client sent in German
    leaves German active on this thread (LocaleMiddleware activates, nothing deactivates),
    and every later test on it would read German."""
    yield
    translation.deactivate()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_queue(clock: FakeClock) -> Callable[..., Queue]:
    def make(name: str = "q", **options: Any) -> Queue:
        options.setdefault("clock", clock)
        return queue(name, **options)

    return make


@pytest.fixture
def q(make_queue: Callable[..., Queue]) -> Queue:
    return make_queue("shop-emails")


@pytest.fixture
def is_postgres() -> bool:
    """Served by the PostgreSQL dialect (not PostgreSQL through the ORM dialect)."""
    from django_alkqueue.sql import dialect_name

    return dialect_name(connection) == "postgresql"


#: PostgreSQL's defaults for the planner settings the hot path pins while a statement runs.
PLANNER_DEFAULTS = {"plan_cache_mode": "auto", "enable_seqscan": "on", "enable_bitmapscan": "on",
                    "enable_hashjoin": "on", "enable_mergejoin": "on"}  # fmt: skip


def fill_ten_queues(cursor: Any, analyse: bool = True) -> None:
    """PostgreSQL: 100,000 pending jobs over queues q0-q9 and priorities -3..3, analysed
    unless told not: the table the plan tests EXPLAIN their statements against."""
    cursor.execute(
        """
        INSERT INTO alkqueue_message (queue, payload, priority, attempts, max_attempts,
            backoff_base, lease, run_at, enqueued_at)
        SELECT 'q' || (i % 10), 'null', (i % 7) - 3, 0, 5, 5, 30, now(), now()
        FROM generate_series(1, 100000) AS i
        """
    )
    if analyse:
        cursor.execute("ANALYZE alkqueue_message")


def empty_statistics_with_pages(cursor: Any) -> None:
    """PostgreSQL, outside a transaction: the live table's statistics as a busy queue's often
    are, taken while it was empty but still had its pages (a VACUUM that could not truncate
    them): 0 tuples on many pages, which the planner reads as one row, whatever the table
    holds later. Autovacuum is off for the table until the test ends (`frozen_statistics`):
    its ANALYZE of the rows a test adds next would replace these statistics."""
    cursor.execute("ALTER TABLE alkqueue_message SET (autovacuum_enabled = false)")
    fill_ten_queues(cursor)
    cursor.execute("DELETE FROM alkqueue_message")
    # The DELETE's counts reach the shared statistics before the VACUUM sets them: flushed
    # after it, they would take the rows added next off its count of none.
    cursor.execute("SELECT pg_stat_force_next_flush()")
    cursor.execute("VACUUM (ANALYZE, TRUNCATE false) alkqueue_message")


@pytest.fixture
def frozen_statistics(transactional_db: None) -> Iterator[None]:
    """For a test that calls `empty_statistics_with_pages`: autovacuum back on afterwards."""
    yield
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE alkqueue_message RESET (autovacuum_enabled)")


def planner_settings(cursor: Any) -> dict[str, str]:
    """The session's current value of each pinned planner setting, through `cursor` (Django's
    or psycopg's)."""
    names = list(PINNED_PLAN_SETTINGS)
    cursor.execute("SELECT " + ", ".join(f"current_setting('{name}')" for name in names))
    return dict(zip(names, cursor.fetchone(), strict=True))


@pytest.fixture
def seeded(request: pytest.FixtureRequest) -> Seeded:
    """The admin tests' database (tests/admin_helpers.seed); a module or test may size it
    with @pytest.mark.seed(pending=..., dead=...)."""
    marker = request.node.get_closest_marker("seed")
    return seed(**(marker.kwargs if marker else {}))


@pytest.fixture
def root_user() -> Any:
    return make_user("root", superuser=True)


@pytest.fixture
def root(root_user: Any) -> Any:
    """A logged-in superuser's test client."""
    return client_for(root_user)


def wait_until(
    predicate: Callable[[], bool],
    timeout: float = 10.0,
    every: float = 0.02,
    what: str | Callable[[], str] = "condition",
) -> None:
    """The one polling helper: check a condition (a row update, a process state) every
    `every` seconds until it holds; fail naming `what` when time runs out (a callable
    `what` is asked then, so it can say what the rows and the worker's output were then)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"{said}: not met within {timeout:g}s")
        time.sleep(every)


def run_threads(count: int, target: Callable[[int], None]) -> None:
    """Run target(i) in `count` threads, each closing its own DB connection; re-raise errors."""
    from django.db import connections

    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def body(i: int) -> None:
        try:
            start.wait()
            target(i)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


#: The environment a worker subprocess needs to serve tests/running_consumers.py's queues.
RUNNING_CONSUMERS = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.running_consumers"}


@pytest.fixture
def running_consumers() -> Any:
    """tests/running_consumers.py's consumers (time limits, cancelling, progress) registered
    afresh in this process for one test, and unregistered after it."""
    import tests.running_consumers

    importlib.reload(tests.running_consumers)
    yield
    for name in tests.running_consumers.QUEUES:
        registry.unregister(name)
