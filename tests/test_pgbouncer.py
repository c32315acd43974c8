"""Through a real PgBouncer in transaction pooling mode, set up as docs/worker.md (PgBouncer)
says: claims, acks, retries and heartbeats through the pooler, LISTEN on a direct alias.
The pooler has one server connection, so every client's transactions share one backend:
session state a statement left behind would reach the next client right there.

Debian 12's PgBouncer (1.18) cannot keep prepared statements in transaction mode (1.21 and
later can, with max_prepared_statements). Behind a pooler the hot statements are not
prepared, so the workers drain through it with PREPARED_STATEMENTS left on as well as off.
With one client, the one server connection keeps its prepared statements, which is enough for
the claim's pinned settings."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.jobs import Stamps
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.sql.postgresql import session
from django_alkqueue.sql.postgresql.dialect import PostgresDialect
from django_alkqueue.sql.postgresql.session import behind_a_pooler, fetch_all
from django_alkqueue.sql.postgresql.statements import CLAIM, claim_params
from django_alkqueue.worker.leader import LEADER_LOCK_KEY
from testproject.shop.models import HandlerRun
from tests.conftest import PLANNER_DEFAULTS, planner_settings, wait_until
from tests.pgbouncer import PGBOUNCER, pgbouncer, url
from tests.workers import database_env, run_worker, start_worker, stop

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres_only,
    pytest.mark.skipif(not Path(PGBOUNCER).exists(), reason=f"no pgbouncer at {PGBOUNCER}: "
                       "`make test` installs Debian's (apt-get install pgbouncer)"),
]  # fmt: skip

# Every fifth job fails once (the emails consumer retries at once), so retries go through too.
PAYLOADS = [{"i": i, **({"fail_times": 1} if i % 5 == 0 else {})} for i in range(300)]


def through(port: int) -> dict[str, str]:
    """A worker's environment: claims and acks through the pooler, LISTEN on a direct alias."""
    return {"DATABASE_URL": url(port), "ALKQUEUE_LISTEN_URL": database_env()["DATABASE_URL"]}


def assert_each_job_ran_to_its_end(ids: list[int]) -> None:
    assert QueueMessage.objects.count() == 0
    assert DeadLetter.objects.count() == 0
    runs = Counter(HandlerRun.objects.values_list("job_id", flat=True))
    assert runs == {job_id: 2 if i % 5 == 0 else 1 for i, job_id in enumerate(ids)}


def server_prepared(port: int) -> list[tuple[str, int, int]]:
    """The statements prepared on the pooler's one server connection, with their plan counts."""
    with psycopg.connect(url(port), autocommit=True, prepare_threshold=None) as conn:
        return conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchall()


@contextmanager
def django_connection(port: int) -> Iterator[BaseDatabaseWrapper]:
    """A Django connection to the test database through the pooler."""
    default = connections["default"]
    settings_dict: dict[str, Any] = {**default.settings_dict, "HOST": "127.0.0.1", "PORT": port}
    wrapper = type(default)(settings_dict, alias="through-pgbouncer")
    try:
        yield wrapper
    finally:
        wrapper.close()


def test_workers_drain_through_pgbouncer_with_prepared_statements_switched_off():
    ids = [job.id for job in queue("shop-emails").enqueue_many(PAYLOADS)]

    with pgbouncer() as port:
        run_worker("--queue", "shop-emails", "--burst", "--concurrency", "4", "--processes", "2",
                   env={**through(port), "ALKQUEUE_PREPARED_STATEMENTS": "0"})  # fmt: skip
        prepared = server_prepared(port)

    assert_each_job_ran_to_its_end(ids)
    assert not [row for row in prepared if "alkqueue_message" in row[0]], prepared


def test_workers_drain_through_pgbouncer_with_the_default_settings():
    ids = [job.id for job in queue("shop-emails").enqueue_many(PAYLOADS)]

    with pgbouncer() as port:
        # PREPARED_STATEMENTS left on: behind a pooler the workers prepare nothing.
        output = run_worker("--queue", "shop-emails", "--burst", "--concurrency", "4",
                            "--processes", "2", env=through(port))  # fmt: skip
        prepared = server_prepared(port)

    assert_each_job_ran_to_its_end(ids)
    assert "database error" not in output  # no loop had to retry a statement
    assert not [row for row in prepared if "alkqueue_message" in row[0]], prepared


def test_a_connection_through_pgbouncer_is_behind_a_pooler():
    with pgbouncer() as port, django_connection(port) as pooled:
        pooled.ensure_connection()
        assert behind_a_pooler(pooled) is True


def test_enqueues_inside_transactions_of_clients_sharing_a_server_connection_all_commit():
    # Were they prepared, the second client's statement name would be taken on the one server
    # connection, and the refusal would abort its transaction.
    now = timezone.now()
    stamps = Stamps(priority=0, max_attempts=5, backoff_base=5, lease=30, retention=None,
                    run_at=now, enqueued_at=now, expires_at=None, unique_key=None)  # fmt: skip
    with pgbouncer() as port, django_connection(port) as first, django_connection(port) as second:
        for client in [first, second, first, second]:
            client.ensure_connection()
            client.set_autocommit(False)
            PostgresDialect().insert_unique(client, "shop-emails", "{}", stamps)
            client.commit()
            client.set_autocommit(True)
        prepared = server_prepared(port)

    assert QueueMessage.objects.count() == 4
    assert not [row for row in prepared if "alkqueue_message" in row[0]], prepared


def test_the_claims_pinned_settings_do_not_reach_the_next_client_of_the_server_connection(
    monkeypatch,
):
    queue("shop-emails").enqueue_many([{"i": i} for i in range(3)])
    # As through a pooler that passes the server's process id on: the claim is prepared and
    # sent behind its set_config() in one pipeline.
    monkeypatch.setitem(session._POOLED, "through-pgbouncer", False)

    with pgbouncer() as port, django_connection(port) as pooled:
        pooled.ensure_connection()
        pooled.set_autocommit(True)
        params = claim_params("shop-emails", "w1", 1, timezone.now(), uuid.uuid4())
        rows = fetch_all(pooled, CLAIM, params, generic_plan=True)
        claimed_on = fetch_all(pooled, "SELECT pg_backend_pid()", [])[0][0]
        with psycopg.connect(url(port), autocommit=True, prepare_threshold=None) as other:
            seen_on = other.execute("SELECT pg_backend_pid()").fetchone()
            settings = planner_settings(other.cursor())
        prepared = server_prepared(port)

    assert len(rows) == 1
    assert [row[1] for row in prepared if "FOR UPDATE SKIP LOCKED" in row[0]] == [1]  # generic
    assert seen_on == (claimed_on,)  # the same server connection, so a leak would show
    assert settings == PLANNER_DEFAULTS


def leader_lock_holders() -> list[int]:
    """The server processes holding the leader's advisory lock in this test's database."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [LEADER_LOCK_KEY & 0xFFFFFFFF],
        )
        return [row[0] for row in cursor.fetchall()]


def test_the_leaders_advisory_lock_is_held_on_the_direct_alias_not_on_the_pooled_server():
    # A session lock taken through the pooler would stay on its one server connection,
    # whichever client runs there next; on the direct alias it lives as long as the worker.
    with pgbouncer() as port:
        with psycopg.connect(url(port), autocommit=True, prepare_threshold=None) as pooled:
            pooled_pid = pooled.execute("SELECT pg_backend_pid()").fetchone()
        worker = start_worker("--queue", "shop-emails", env=through(port))
        try:
            wait_until(lambda: bool(leader_lock_holders()), timeout=30)
            holders = leader_lock_holders()
        finally:
            stop(worker)

    assert pooled_pid is not None and holders and pooled_pid[0] not in holders, holders
    wait_until(lambda: leader_lock_holders() == [], what="the stopped worker's lock freed")
