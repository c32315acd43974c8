from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from django_alkqueue import queue
from django_alkqueue.queues import Queue
from django_alkqueue.sql import wake_pacing
from django_alkqueue.sql.hot_cursor import PINNED_PLAN_SETTINGS
from tests.clocks import FakeClock


def pytest_report_header(config: pytest.Config) -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    dialect = settings.ALKQUEUE.get("DIALECT", "auto")
    return f"database: {_engine()} {db.get('HOST') or db['NAME']}, dialect {dialect}"


def _engine() -> str:
    from django.conf import settings

    return str(settings.DATABASES["default"]["ENGINE"]).rsplit(".", 1)[-1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from django.conf import settings

    engine = _engine()
    forced_orm = settings.ALKQUEUE.get("DIALECT", "auto") == "orm"
    skips = {
        # Needs PostgreSQL and its own dialect (NOTIFY, prepared statements, COPY, catalog).
        "postgres_only": (engine != "postgresql" or forced_orm,
                          f"PostgreSQL-dialect behaviour; this run is on {engine}"
                          + (" with the ORM dialect" if forced_orm else "")),
        # Needs SQLite and its own dialect's statements.
        "sqlite_only": (engine != "sqlite3" or forced_orm,
                        f"SQLite-dialect behaviour; this run is on {engine}"
                        + (" with the ORM dialect" if forced_orm else "")),
    }  # fmt: skip
    for item in items:
        for marker, (skipped, reason) in skips.items():
            if skipped and marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def no_notify_sent_yet() -> None:
    """Each test starts with no NOTIFY sent on this thread's connection: the time of the last
    one lives on Django's connection object, which outlives a test (sql/wake_pacing.py)."""
    if hasattr(connection, wake_pacing._LAST_SENT):
        delattr(connection, wake_pacing._LAST_SENT)


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


def planner_settings(cursor: Any) -> dict[str, str]:
    """The session's current value of each pinned planner setting, through `cursor` (Django's
    or psycopg's)."""
    names = list(PINNED_PLAN_SETTINGS)
    cursor.execute("SELECT " + ", ".join(f"current_setting('{name}')" for name in names))
    return dict(zip(names, cursor.fetchone(), strict=True))


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, every: float = 0.02) -> None:
    """Poll a condition (a row update, a process state) until it holds or time runs out."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
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
