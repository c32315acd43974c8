"""What the overview and the queue page show across permission boundaries and with data the
pages did not expect (issue 33, defects 5, 8 and 9): error headlines only to those who may
read dead letters, other sessions' SQL only with view_session_sql, names that cannot be a
URL shown unlinked, and thousands of queues paginated with their totals kept."""

from __future__ import annotations

import re

import pytest
from django.db import connections
from django.utils import timezone

from django_alkqueue.admin.overview import QUEUES_PER_PAGE
from django_alkqueue.models import Consumer, QueueMessage
from tests.admin_helpers import (
    CONSUMERS,
    OVERVIEW,
    Seeded,
    client_for,
    dead_lettered,
    make_user,
    queue_url,
)

pytestmark = pytest.mark.django_db

CARD = "4111 1111 1111 1111"


def job_row(name: str) -> QueueMessage:
    now = timezone.now()
    return QueueMessage.objects.create(
        queue=name, payload={}, run_at=now, enqueued_at=now, max_attempts=3, backoff_base=1,
        lease=30,
    )  # fmt: skip


# -- defect 8: the error headlines and the session SQL ---------------------------------------


def test_the_queue_page_shows_error_headlines_only_to_who_may_view_dead_letters(seeded):
    # A word, not a number: the error groups show numbers as <num> anyway.
    dead_lettered("shop-webhooks", {}, "ValueError: holder Zebediah refused")
    stats_only = client_for(make_user("stats", "view_queuestat"))
    html = stats_only.get(queue_url("shop-webhooks")).content.decode()
    assert "Zebediah" not in html and "Most frequent errors" not in html
    both = client_for(make_user("both", "view_queuestat", "view_deadletter"))
    assert "Zebediah" in both.get(queue_url("shop-webhooks")).content.decode()


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_other_sessions_sql_is_shown_only_with_view_session_sql():
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT txid_current(), 'alk-session-secret'")
        stats = client_for(make_user("stats", "view_queuestat")).get(OVERVIEW)
        assert stats.status_code == 200
        assert "alk-session-secret" not in stats.content.decode()
        granted = make_user("dba", "view_queuestat", "view_session_sql")
        assert "alk-session-secret" in client_for(granted).get(OVERVIEW).content.decode()
        root = make_user("root", superuser=True)
        assert "alk-session-secret" in client_for(root).get(OVERVIEW).content.decode()
    finally:
        other.rollback()
        other.close()


# -- defect 5: queue names that cannot be a URL ----------------------------------------------


@pytest.mark.parametrize("name", ["shop/emails", "", "a/b/c"])
def test_a_queue_name_that_cannot_be_a_url_is_listed_unlinked(seeded, root, name):
    job_row(name)
    Consumer.objects.create(queue=name, handler="x.y", lease=30, max_attempts=3)
    overview = root.get(OVERVIEW)
    assert overview.status_code == 200
    row = next(r for r in overview.context["rows"] if r.figures.queue == name)
    assert row.url is None
    assert f'data-queue="{name}"' in overview.content.decode()
    consumers = root.get(CONSUMERS)
    assert consumers.status_code == 200
    assert name == "" or name in consumers.content.decode()


# -- defect 9: many queues -------------------------------------------------------------------


def many_queues(n: int) -> None:
    now = timezone.now()
    QueueMessage.objects.bulk_create(
        QueueMessage(
            queue=f"tenant-{i:05d}", payload={}, run_at=now, enqueued_at=now, max_attempts=3,
            backoff_base=1, lease=30,
        )
        for i in range(n)
    )  # fmt: skip


def listed(html: str) -> list[str]:
    return re.findall(r'data-queue="([^"]*)"', html)


def test_the_overview_lists_one_page_of_queues_and_totals_them_all(seeded: Seeded, root):
    many_queues(250)
    total_pending = QueueMessage.objects.pending(timezone.now()).count()
    first = root.get(OVERVIEW)
    assert len(listed(first.content.decode())) == QUEUES_PER_PAGE
    assert first.context["totals"]["pending"] == total_pending
    assert first.context["totals"]["queues"] == 252  # and shop-emails, shop-webhooks
    last = root.get(f"{OVERVIEW}?p=3")
    assert len(listed(last.content.decode())) == 52
    assert last.context["totals"]["pending"] == total_pending
    assert 'href="?p=2"' in last.content.decode()


def test_the_overview_search_narrows_the_rows_and_keeps_the_totals(seeded, root):
    many_queues(150)
    found = root.get(f"{OVERVIEW}?q=TENANT-0001")
    assert listed(found.content.decode()) == [f"tenant-{i:05d}" for i in range(10, 20)]
    assert found.context["totals"]["queues"] == 152
    assert "10 of 152 match" in found.content.decode()


def test_the_pages_of_a_search_keep_the_search(seeded, root):
    many_queues(250)
    html = root.get(f"{OVERVIEW}?q=tenant").content.decode()
    assert 'href="?q=tenant&amp;p=2"' in html


@pytest.mark.parametrize("page", ["0", "-1", "abc", "99999999999999999999999", "9"])
def test_a_page_number_out_of_range_shows_a_page(seeded, root, page):
    many_queues(120)
    response = root.get(f"{OVERVIEW}?p={page}")
    assert response.status_code == 200
    assert listed(response.content.decode())
