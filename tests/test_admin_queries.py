"""The admin stays fast on big tables: a fixed number of queries per page whatever the row
count, no unbounded COUNT(*), estimated totals past the cap, and (PostgreSQL) every filter
answered by an index."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.admin.counts import EstimatedCountPaginator
from django_alkqueue.models import Consumer, DeadLetter, Worker
from django_alkqueue.reports.status import known_queues
from django_alkqueue.sql.queue_scans import KNOWN_QUEUES_SQL
from tests.admin_helpers import (
    CONSUMERS,
    DEAD,
    JOBS,
    OVERVIEW,
    VIEW_PERMS,
    WORKERS,
    add_worker,
    client_for,
    dead_lettered,
    make_user,
    queue_url,
    seed,
)

pytestmark = pytest.mark.django_db

#: Queries a view-only user adds to a page: two permission reads, and, without view_payload,
#: one read of the sensitive queues (admin/masking.py).
VIEWER_QUERIES = 3
#: Most queries a page may make for a superuser.
#: Changelist: session, user, queue names (one statement), bounded count, the page.
CHANGELIST_QUERIES = 5
#: The job list reads the jobs cancelled while running too ("cancel requested").
JOB_CHANGELIST_QUERIES = CHANGELIST_QUERIES + 1
DETAIL_QUERIES = 3
#: A job's page (live, dead letter, finished) asks whether the job is in a workflow: its
#: dependency edges and its batch membership (admin/workflow_panel.py).
WORKFLOW_PANEL_QUERIES = 2
#: ... and reads its durable steps once (admin/steps_panel.py).
STEPS_PANEL_QUERIES = 1
#: A job's detail page also reads the admin log once: the dead letter it was requeued from.
JOB_DETAIL_QUERIES = DETAIL_QUERIES + 1 + WORKFLOW_PANEL_QUERIES + STEPS_PANEL_QUERIES
#: 8 figures (the eighth: the sleeping jobs, status.sleeping_counts) + 1 workers + 4 health
#: (PostgreSQL) + session and user.
OVERVIEW_QUERIES = 15
QUEUE_DETAIL_QUERIES = 10  # the fair keys: their unclaimed jobs, then their claims in the hour


def pages(seeded) -> dict[str, int]:
    dead = DeadLetter.objects.order_by("pk").first().pk
    consumer = Consumer.objects.get(queue="shop-emails").pk
    worker = Worker.objects.order_by("pk").first().pk
    return {
        JOBS: JOB_CHANGELIST_QUERIES,
        f"{JOBS}?queue=shop-emails&state=pending": JOB_CHANGELIST_QUERIES,
        f"{JOBS}?state=claimed": JOB_CHANGELIST_QUERIES,
        f"{JOBS}?q={seeded.pending[0]}": JOB_CHANGELIST_QUERIES,
        f"{JOBS}{seeded.pending[0]}/change/": JOB_DETAIL_QUERIES,
        DEAD: CHANGELIST_QUERIES,
        f"{DEAD}?queue=shop-webhooks&reason=failed": CHANGELIST_QUERIES,
        f"{DEAD}{dead}/change/": DETAIL_QUERIES + WORKFLOW_PANEL_QUERIES + STEPS_PANEL_QUERIES,
        CONSUMERS: CHANGELIST_QUERIES - 1,  # no queue filter
        f"{CONSUMERS}{consumer}/change/": DETAIL_QUERIES,
        WORKERS: CHANGELIST_QUERIES - 1,
        f"{WORKERS}{worker}/change/": DETAIL_QUERIES,
        OVERVIEW: OVERVIEW_QUERIES,
        queue_url("shop-emails"): QUEUE_DETAIL_QUERIES,
    }


def queries_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [q["sql"] for q in captured.captured_queries]


def grow(n: int) -> None:
    """More of every kind of row: live jobs in all states, dead letters, workers."""
    emails = queue("shop-emails")
    emails.enqueue_many([{"i": i} for i in range(n)])
    emails.enqueue_many([{"i": i} for i in range(n)], delay=600)
    emails.claim(f"w-{n}", n)
    for i in range(n):
        dead_lettered("shop-webhooks", {"i": i}, f"ValueError: {i}")
        add_worker(f"host:{n}:{i}", stale=i % 2 == 0)


def test_query_counts_are_bounded_and_do_not_grow_with_the_rows():
    seeded = seed()
    add_worker("host:0")
    client = client_for(make_user("root", superuser=True))
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    bounds = pages(seeded)
    for url in bounds:  # warm the caches (content types, ...)
        queries_of(client, url)
    before = {url: len(queries_of(client, url)) for url in bounds}
    grow(40)
    for url, bound in bounds.items():
        after = len(queries_of(client, url))
        assert after == before[url], url
        assert after <= bound, (url, queries_of(client, url))
        assert len(queries_of(viewer, url)) <= bound + VIEWER_QUERIES, url


def test_no_changelist_counts_the_whole_table():
    seeded = seed()
    add_worker("host:0")
    client = client_for(make_user("root", superuser=True))
    for url in pages(seeded):
        if "change/" in url or url.startswith(f"{OVERVIEW}"):
            continue
        for sql in queries_of(client, url):
            if sql.startswith("SELECT COUNT(*)"):
                assert "LIMIT 10001" in sql, (url, sql)


def test_past_the_cap_the_list_shows_an_estimate_or_a_lower_bound(monkeypatch, is_postgres):
    monkeypatch.setattr(EstimatedCountPaginator, "cap", 10)
    queue("shop-emails").enqueue_many([{}] * 30)
    connection.cursor().execute("ANALYZE alkqueue_message") if is_postgres else None
    client = client_for(make_user("root", superuser=True))
    response = client.get(JOBS)
    paginator = response.context["cl"].paginator
    html = response.content.decode()
    if is_postgres:
        assert paginator.estimated and "(estimated)" in html
    else:
        assert paginator.at_least and "more than 10 jobs" in html
    assert client.get(JOBS, {"p": 2}).status_code == 200


def test_an_exact_count_is_shown_under_the_cap():
    queue("shop-emails").enqueue_many([{}] * 3)
    html = client_for(make_user("root", superuser=True)).get(JOBS).content.decode()
    assert '<span id="alk-result-count">3 jobs</span>' in html


def test_queue_names_come_from_every_source():
    Consumer.objects.create(queue="idle", handler="x.y", lease=30, max_attempts=3)
    queue("shop-emails").enqueue({})
    queue("shop-reports").enqueue({})
    queue("shop-reports").claim_one("w")
    dead_lettered("shop-webhooks", {}, "boom")
    assert known_queues("default") == ["idle", "shop-emails", "shop-reports", "shop-webhooks"]


# -- PostgreSQL plans on 100k rows -----------------------------------------------------------


def fill_big_tables() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO alkqueue_message (queue, payload, priority, attempts, max_attempts,
                backoff_base, lease, run_at, enqueued_at, claim_token, claimed_by,
                lease_expires_at)
            SELECT 'q' || (i % 100), '{}', 0, 0, 5, 5, 30,
                   now() + CASE WHEN i % 10 = 0 THEN interval '1 hour' ELSE interval '0' END,
                   now(),
                   CASE WHEN i % 1000 = 0 THEN gen_random_uuid() END,
                   CASE WHEN i % 1000 = 0 THEN 'w' END,
                   CASE WHEN i % 1000 = 0 THEN now() + interval '30 seconds' END
            FROM generate_series(1, 100000) AS i
            """
        )
        cursor.execute(
            """
            INSERT INTO alkqueue_deadletter (job_id, queue, payload, priority, attempts,
                max_attempts, backoff_base, lease, run_at, enqueued_at, died_at, reason,
                last_error, error_fingerprint)
            SELECT 1000000 + i, 'q' || (i % 100), '{}', 0, 5, 5, 5, 30, now(), now(),
                   now() - (i || ' seconds')::interval,
                   CASE WHEN i % 50 = 0 THEN 'expired' ELSE 'failed' END, 'ValueError: x',
                   'fp' || (i % 7)
            FROM generate_series(1, 100000) AS i
            """
        )
        cursor.execute("ANALYZE alkqueue_message")
        cursor.execute("ANALYZE alkqueue_deadletter")


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


FILTERED_PAGES = [
    f"{JOBS}?queue=q3",
    f"{JOBS}?queue=q3&state=pending",
    f"{JOBS}?queue=q3&state=scheduled",
    f"{JOBS}?queue=q3&state=claimed",
    f"{JOBS}?state=claimed",
    f"{JOBS}?q=12345",
    f"{DEAD}?queue=q3",
    f"{DEAD}?reason=expired",
    f"{DEAD}?queue=q3&reason=failed",
    f"{DEAD}?q=1000007",
    f"{DEAD}?error=fp3",
    f"{DEAD}?queue=q3&error=fp3",
]


@pytest.mark.postgres_only
def test_filters_and_queue_names_use_indexes_on_100k_rows():
    fill_big_tables()
    client = client_for(make_user("root", superuser=True))
    recent = urlencode({"died_at__gte": (timezone.now() - timedelta(hours=1)).isoformat()})
    for url in [*FILTERED_PAGES, f"{DEAD}?{recent}", f"{DEAD}?queue=q3&{recent}"]:
        for sql in queries_of(client, url):
            if "alkqueue_" not in sql or sql.startswith("EXPLAIN"):
                continue
            plan = plan_of(sql)
            assert "Seq Scan on alkqueue_message" not in plan, (url, sql, plan)
            assert "Seq Scan on alkqueue_deadletter" not in plan, (url, sql, plan)
    plan = plan_of(KNOWN_QUEUES_SQL)
    assert "Seq Scan on alkqueue_message" not in plan, plan
    assert "Seq Scan on alkqueue_deadletter" not in plan, plan
    assert "alkqueue_pending_idx" in plan and "alkqueue_lease_idx" in plan, plan
    assert len(known_queues("default")) == 100


@pytest.mark.postgres_only
def test_a_queue_pages_error_groups_read_the_dead_letters_through_an_index_on_100k_rows():
    fill_big_tables()
    client = client_for(make_user("root", superuser=True))
    dead_letter_reads = [
        sql for sql in queries_of(client, queue_url("q3")) if "alkqueue_deadletter" in sql
    ]
    assert any("GROUP BY" in sql for sql in dead_letter_reads)
    for sql in dead_letter_reads:
        plan = plan_of(sql)
        assert "Seq Scan on alkqueue_deadletter" not in plan, (sql, plan)
        if "GROUP BY" in sql:
            assert "alkqueue_dead_error_idx" in plan, plan


@pytest.mark.postgres_only
def test_the_unfiltered_lists_of_100k_rows_read_one_page_and_estimate_the_total():
    fill_big_tables()
    client = client_for(make_user("root", superuser=True))
    for url in (JOBS, DEAD):
        response = client.get(url)
        assert response.context["cl"].paginator.estimated, url
        assert len(response.context["cl"].result_list) == 50
        assert "(estimated)" in response.content.decode()
        for sql in queries_of(client, url):
            if sql.startswith("SELECT") and "alkqueue_" in sql and "RECURSIVE" not in sql:
                assert "LIMIT" in sql, sql
