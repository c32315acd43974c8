"""The admin's "Finished jobs" (docs/admin.md): the history's list, filtered by queue
and outcome, with a date hierarchy on finished_at and search by job id or concurrency key,
and its detail page with output and timings. A fixed number of queries per page, and on
PostgreSQL every filter answered by an index of the partitioned table."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_alkqueue import operations
from django_alkqueue.models import FinishedJob
from django_alkqueue.sql.postgresql.history import partition_name
from tests.admin_helpers import ADMIN, client_for, make_user

pytestmark = pytest.mark.django_db

FINISHED = f"{ADMIN}/finishedjob/"
DAY = datetime(2031, 3, 10, 12, 0, tzinfo=UTC)
#: Session, user, queue names, bounded count, the page; the date hierarchy adds one (which
#: of its months or days have rows), and one more at its top (the first and last finished_at).
CHANGELIST_QUERIES = 5
#: Session, user, the row; then whether the job is in a workflow (its edges, its batch), and
#: its durable steps.
DETAIL_QUERIES = 3 + 2 + 1


def keep_row(job_id: int, *, queue: str = "kept", outcome: str = "succeeded",
             finished_at: datetime = DAY, output: object = None,
             key: str | None = None) -> FinishedJob:  # fmt: skip
    return FinishedJob.objects.create(
        job_id=job_id, queue=queue, payload={"n": job_id}, attempts=2, max_attempts=3,
        backoff_base=5, lease=30, concurrency_key=key, enqueued_at=finished_at - timedelta(
            seconds=10), started_at=finished_at - timedelta(seconds=2), finished_at=finished_at,
        duration=1.5, worker_id="host:1", outcome=outcome, output=output,
        delete_after=finished_at + timedelta(days=1),
    )  # fmt: skip


def ids_on(client, url: str) -> list[int]:
    response = client.get(url)
    assert response.status_code == 200, url
    return [row.job_id for row in response.context["cl"].result_list]


def queries_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [q["sql"] for q in captured.captured_queries]


@pytest.fixture
def root():
    return client_for(make_user("root", superuser=True))


def test_the_list_shows_finished_jobs_newest_first(root):
    keep_row(1, finished_at=DAY)
    keep_row(2, finished_at=DAY + timedelta(hours=1))

    assert ids_on(root, FINISHED) == [2, 1]


@override_settings(ALKQUEUE={"QUEUES": {"a": {"keep": 60}, "b": {"keep": 60}}})
def test_the_list_filters_by_queue_and_by_outcome(root):
    keep_row(1, queue="a")
    keep_row(2, queue="b")
    keep_row(3, queue="a", outcome="cancelled")

    assert sorted(ids_on(root, f"{FINISHED}?queue=a")) == [1, 3]
    assert ids_on(root, f"{FINISHED}?outcome=cancelled") == [3]
    assert sorted(ids_on(root, f"{FINISHED}?outcome=succeeded")) == [1, 2]
    assert ids_on(root, f"{FINISHED}?outcome=dead") == []


def test_search_finds_a_job_id_or_a_concurrency_key_exactly(root):
    keep_row(41, key="customer-7")
    keep_row(42, key="customer-70")

    assert ids_on(root, f"{FINISHED}?q=41") == [41]
    assert ids_on(root, f"{FINISHED}?q=customer-7") == [41]
    assert ids_on(root, f"{FINISHED}?q=customer") == []


def test_the_date_hierarchy_drills_down_from_years_to_a_day(root):
    keep_row(1, finished_at=DAY)
    keep_row(2, finished_at=DAY.replace(year=2032))

    top = root.get(FINISHED).content.decode()
    assert "finished_at__year=2031" in top and "finished_at__year=2032" in top
    year = root.get(f"{FINISHED}?finished_at__year=2031").content.decode()
    assert "finished_at__month=3" in year
    month = root.get(f"{FINISHED}?finished_at__year=2031&finished_at__month=3").content.decode()
    assert "finished_at__day=10" in month
    assert ids_on(root, f"{FINISHED}?finished_at__year=2031&finished_at__month=3"
                        "&finished_at__day=10") == [1]  # fmt: skip
    assert ids_on(root, f"{FINISHED}?finished_at__year=2031&finished_at__month=3"
                        "&finished_at__day=11") == []  # fmt: skip


def hierarchy_links(client, query: str = "") -> list[str]:
    """The titles of the date hierarchy's links on the list page of `query`."""
    html = client.get(f"{FINISHED}?{query}").content.decode()
    block = re.search(r'<nav class="toplinks"[^>]*>(.*?)</nav>', html, re.S)
    assert block, html
    return re.findall(r'<a href="\?[^"]*finished_at__[^"]*">([^<]+)</a>', block[1])


def test_the_date_hierarchy_lists_only_the_years_months_and_days_that_have_rows(root):
    for at in (DAY, DAY.replace(day=20), DAY.replace(month=7), DAY.replace(year=2033)):
        keep_row(int(at.timestamp()), finished_at=at)

    assert hierarchy_links(root) == ["2031", "2033"]
    assert hierarchy_links(root, "finished_at__year=2031") == ["March 2031", "July 2031"]
    month = "finished_at__year=2031&finished_at__month=3"
    assert hierarchy_links(root, month) == ["March 10", "March 20"]


@override_settings(TIME_ZONE="Pacific/Auckland")
def test_the_date_hierarchy_offers_the_day_a_row_has_in_the_sites_time_zone(root):
    keep_row(1, finished_at=datetime(2031, 3, 10, 20, 0, tzinfo=UTC))  # 11 March in Auckland

    month = "finished_at__year=2031&finished_at__month=3"
    assert hierarchy_links(root, month) == ["March 11"]


def test_the_date_hierarchy_of_a_filtered_list_lists_the_filtered_rows_days(root):
    keep_row(1, queue="a", finished_at=DAY)
    keep_row(2, queue="b", finished_at=DAY.replace(day=20))

    with override_settings(ALKQUEUE={"QUEUES": {"a": {"keep": 60}, "b": {"keep": 60}}}):
        links = hierarchy_links(root, "queue=b&finished_at__year=2031&finished_at__month=3")
    assert links == ["March 20"]


#: Date hierarchy query strings Django cannot turn into a range of days: a year past 9998
#: (the range ends in year 10000), numbers past a C long, spellings int() takes but the links
#: never write, a month or day out of range, words.
HOSTILE_DATES = [
    "finished_at__year=9999",
    "finished_at__year=9999&finished_at__month=12",
    "finished_at__year=9999&finished_at__month=12&finished_at__day=31",
    "finished_at__year=99999999999999999999",
    "finished_at__year=2031&finished_at__month=99999999999999999999",
    "finished_at__year=2031&finished_at__month=3&finished_at__day=99999999999999999999",
    "finished_at__year=0",
    "finished_at__year=-1",
    "finished_at__year=-2031&finished_at__month=3",
    "finished_at__year=1",
    "finished_at__year=%2B2031",
    "finished_at__year=%202031",
    "finished_at__year=2_031",
    "finished_at__year=%D9%A2%D9%A0%D9%A3%D9%A1",  # 2031 in Arabic-Indic digits
    "finished_at__year=2031.0",
    "finished_at__year=abc",
    "finished_at__year=",
    "finished_at__year=2031&finished_at__month=13",
    "finished_at__year=2031&finished_at__month=0",
    "finished_at__year=2031&finished_at__month=2&finished_at__day=30",
    "finished_at__month=99999999999999999999",
    "finished_at__day=-5",
    "finished_at__gte=10000-01-01",
    "finished_at__gte=9999-12-31+23%3A59%3A59.999999",
    "finished_at__lt=0001-01-01",
    "finished_at__year=2031&finished_at__year=9999",
]


@pytest.mark.parametrize("query", HOSTILE_DATES)
def test_a_date_hierarchy_query_string_answers_an_empty_list_or_the_invalid_filter_redirect(
    root, query
):
    keep_row(1, finished_at=DAY)

    response = root.get(f"{FINISHED}?{query}")

    if response.status_code == 302:
        assert response["Location"].endswith(f"{FINISHED}?e=1")
    else:
        assert response.status_code == 200
        assert [row.job_id for row in response.context["cl"].result_list] == []


#: Bounds of a date filter at datetime's ends: in a time zone far from UTC, their move to UTC
#: (SQLite and MariaDB get UTC datetimes) leaves datetime's range.
EDGE_BOUNDS = [
    f"{field}__{bound}={value}"
    for field in ("finished_at", "died_at")
    for bound in ("gte", "lt")
    for value in ("0001-01-01", "9999-12-31", "9999-12-31+23%3A59%3A59.999999")
]


@pytest.mark.parametrize("zone", ["Etc/GMT+12", "Pacific/Kiritimati"])
def test_a_date_bound_at_the_end_of_datetimes_range_answers_in_any_time_zone(root, zone):
    keep_row(1, finished_at=DAY)
    with override_settings(TIME_ZONE=zone):
        for query in EDGE_BOUNDS:
            url = FINISHED if query.startswith("finished") else f"{ADMIN}/deadletter/"
            response = root.get(f"{url}?{query}")
            assert response.status_code == 302, query
            assert response["Location"].endswith(f"{url}?e=1"), query


@pytest.mark.parametrize("query", ["finished_at__year=9998", "finished_at__year=9998"
                                   "&finished_at__month=12&finished_at__day=31"])  # fmt: skip
def test_the_last_year_the_hierarchy_can_show_answers_an_empty_list(root, query):
    keep_row(1, finished_at=DAY)
    assert ids_on(root, f"{FINISHED}?{query}") == []


def test_the_detail_page_shows_the_output_and_the_timings(root):
    keep_row(7, output={"charged": 12.5})

    html = root.get(f"{FINISHED}7/change/").content.decode()

    assert "&quot;charged&quot;: 12.5" in html
    assert "1500.0 ms" in html  # ran for
    assert "8 s" in html  # waited: enqueued to claimed
    assert "host:1" in html


def test_the_detail_page_shows_why_an_output_was_not_recorded(root):
    row = keep_row(8)
    FinishedJob.objects.filter(pk=row.pk).update(output_error="output not recorded: not JSON")

    assert "output not recorded: not JSON" in root.get(f"{FINISHED}8/change/").content.decode()


def test_finished_jobs_cannot_be_deleted_or_changed_from_the_admin(root):
    keep_row(9)

    assert root.get(f"{FINISHED}9/delete/").status_code == 403
    assert b'name="action"' not in root.get(FINISHED).content


def test_query_counts_are_bounded_and_do_not_grow_with_the_rows(root):
    keep_row(1, key="k")
    pages = {
        FINISHED: CHANGELIST_QUERIES + 2,
        f"{FINISHED}?queue=kept&outcome=cancelled": CHANGELIST_QUERIES + 2,
        f"{FINISHED}?finished_at__year=2031&finished_at__month=3": CHANGELIST_QUERIES + 1,
        f"{FINISHED}?q=1": CHANGELIST_QUERIES + 2,
        f"{FINISHED}1/change/": DETAIL_QUERIES,
    }
    for url in pages:
        queries_of(root, url)  # warm the caches
    before = {url: len(queries_of(root, url)) for url in pages}
    for job_id in range(2, 60):
        keep_row(job_id, finished_at=DAY + timedelta(minutes=job_id), key=f"k{job_id}")
    for url, bound in pages.items():
        after = len(queries_of(root, url))
        assert after == before[url], url
        assert after <= bound, (url, queries_of(root, url))


def test_no_page_counts_the_whole_history(root):
    keep_row(1)
    for sql in queries_of(root, FINISHED):
        if sql.startswith("SELECT COUNT(*)"):
            assert "LIMIT 10001" in sql, sql


# -- PostgreSQL plans on 100k rows -----------------------------------------------------------


def fill_history() -> None:
    """100k rows over 28 hours around last midnight (UTC): half in yesterday's partition and
    half in today's, whatever the hour the test runs at (just after midnight today's would
    otherwise hold a few hundred rows, and a scan of those is the right plan)."""
    operations.prepare_history("default", datetime.now(UTC) - timedelta(days=1))
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO alkqueue_finishedjob (job_id, queue, payload, priority, attempts,
                max_attempts, backoff_base, lease, concurrency_key, enqueued_at, started_at,
                finished_at, duration, worker_id, outcome, delete_after)
            SELECT i, 'q' || (i % 100), '{}', 0, 1, 5, 5, 30,
                   CASE WHEN i % 10 = 0 THEN 'key-' || i END, now(), now(),
                   date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                       + ((i - 50000) || ' seconds')::interval, 0.01, 'w',
                   CASE WHEN i % 500 = 0 THEN 'cancelled' ELSE 'succeeded' END,
                   now() + interval '1 day'
            FROM generate_series(1, 100000) AS i
            """
        )
        cursor.execute("ANALYZE alkqueue_finishedjob")


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def rows_scanned(sql: str) -> int:
    """The most rows one sequential scan of `sql` read when run (kept and filtered out)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        (plan,) = cursor.fetchone()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    most, nodes = 0, [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        if node["Node Type"] == "Seq Scan":
            read = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            most = max(most, read * node["Actual Loops"])
    return most


@pytest.mark.postgres_only
def test_every_filter_of_the_list_uses_an_index_on_100k_rows(root):
    fill_history()
    now = datetime.now(UTC)
    filled = [partition_name(now.date()), partition_name(now.date() - timedelta(days=1))]
    day = f"finished_at__year={now.year}&finished_at__month={now.month}&finished_at__day={now.day}"
    urls = [FINISHED, f"{FINISHED}?queue=q3", f"{FINISHED}?outcome=cancelled",
            f"{FINISHED}?queue=q3&outcome=cancelled", f"{FINISHED}?q=12345",
            f"{FINISHED}?q=key-12340", f"{FINISHED}?{day}", f"{FINISHED}12345/change/"]  # fmt: skip
    for url in urls:
        for sql in queries_of(root, url):
            if "alkqueue_finishedjob" not in sql or sql.startswith("EXPLAIN"):
                continue
            if "alk_span_" in sql:  # the hierarchy's probes: each stops at its first row
                assert rows_scanned(sql) <= 10, (url, sql)
                continue
            plan = plan_of(sql)
            for table in filled:  # the empty days ahead may be scanned: they have no pages
                assert f"Seq Scan on {table} " not in plan, (url, sql, plan)
    response = root.get(FINISHED)
    assert response.context["cl"].paginator.estimated
    assert len(response.context["cl"].result_list) == 50


def test_the_page_of_a_queue_that_keeps_links_to_its_finished_jobs(root):
    from django_alkqueue import queue

    queue("kept-here").enqueue({})
    queue("not-kept-here").enqueue({})

    with override_settings(ALKQUEUE={"QUEUES": {"kept-here": {"keep": 60}}}):
        kept_page = root.get(f"{ADMIN}/queuestat/queue/kept-here/").content.decode()
        other_page = root.get(f"{ADMIN}/queuestat/queue/not-kept-here/").content.decode()

    assert f'href="{FINISHED}?queue=kept-here" id="alk-finished-link"' in kept_page
    assert "alk-finished-link" not in other_page


@override_settings(ALKQUEUE={"QUEUES": {"private": {"keep": 60, "sensitive": True}}})
def test_a_sensitive_queues_output_is_masked_for_a_user_without_view_payload():
    keep_row(5, queue="private", output={"email": "ann@example.com"})
    viewer = client_for(make_user("viewer", "view_finishedjob"))

    html = viewer.get(f"{FINISHED}5/change/").content.decode()

    assert "ann@example.com" not in html
    assert "&quot;email&quot;: &quot;***&quot;" in html
