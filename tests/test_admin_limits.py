"""No stored row makes a page as large as the row (issue 33, defect 4, the pages' side): the
detail pages show the head and the tail of a long error text or payload, with a note of what
was cut, and each page stays under the size docs/security.md documents."""

from __future__ import annotations

import pytest
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.admin.stored_text import ERROR_SHOWN, PAYLOAD_SHOWN
from django_alkqueue.models import Consumer, DeadLetter, QueueMessage, Worker
from tests.admin_helpers import (
    CONSUMERS,
    DEAD,
    JOBS,
    PAGE_BYTES_MAX,
    VIEW_PERMS,
    WORKERS,
    client_for,
    dead_lettered,
    make_user,
)

pytestmark = pytest.mark.django_db

#: A detail page of one row: its texts capped, whatever the row holds.
DETAIL_BYTES_MAX = 512 * 1024


def long_error() -> str:
    """An error text at the stored cap, whose every character escapes to several in HTML."""
    return "HEAD-OF-ERROR " + '<"' * 40_000 + " TAIL-OF-ERROR"


def test_a_long_error_shows_its_head_and_tail_with_a_note(root):
    job_id = dead_lettered("shop-emails", {}, long_error())
    dead = DeadLetter.objects.get(job_id=job_id)
    html = root.get(f"{DEAD}{dead.pk}/change/").content.decode()
    assert "HEAD-OF-ERROR" in html and "TAIL-OF-ERROR" in html
    assert "characters cut by django-alkqueue" in html
    assert html.count("&lt;") <= ERROR_SHOWN


def test_a_long_payload_shows_its_head_and_tail_with_a_note(root):
    payload = {"first": "HEAD-OF-PAYLOAD", "body": '<"' * 200_000, "last": "TAIL-OF-PAYLOAD"}
    job = queue("shop-emails").enqueue(payload)
    response = root.get(f"{JOBS}{job.id}/change/")
    html = response.content.decode()
    assert "HEAD-OF-PAYLOAD" in html and "TAIL-OF-PAYLOAD" in html
    assert "characters cut by django-alkqueue" in html
    assert html.count("&lt;") <= PAYLOAD_SHOWN
    assert len(response.content) < DETAIL_BYTES_MAX


def test_a_job_with_both_at_their_caps_stays_under_the_detail_page_bound(root):
    q = queue("shop-emails")
    q.enqueue({"body": '"<' * 300_000}, priority=100)
    handle = q.claim_one("w")
    assert handle is not None
    handle.retry(long_error())
    response = root.get(f"{JOBS}{handle.job.id}/change/")
    assert response.status_code == 200
    assert len(response.content) < DETAIL_BYTES_MAX


def test_a_changelist_shown_whole_stays_under_the_page_bound(root):
    now = timezone.now()
    hostile = '"<' * 50
    QueueMessage.objects.bulk_create(
        QueueMessage(
            queue=hostile, payload={}, run_at=now, enqueued_at=now, max_attempts=3,
            backoff_base=1, lease=30, unique_key=f"{i}{hostile * 2}", claimed_by=hostile * 2,
        )
        for i in range(200)
    )  # fmt: skip
    response = root.get(f"{JOBS}?all=")
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == 200
    assert len(response.content) < PAGE_BYTES_MAX


def test_a_worker_on_thousands_of_queues_shows_the_first_few(root):
    now = timezone.now()
    Worker.objects.create(
        worker_id="w-many", hostname="h", pid=1, queues=[f"tenant-{i}" for i in range(5_000)],
        concurrency=1, started_at=now, last_heartbeat_at=now,
    )  # fmt: skip
    html = root.get(WORKERS).content.decode()
    assert "tenant-0" in html and "tenant-4999" not in html
    assert "more characters" in html


def test_a_huge_retry_policy_is_cut_on_the_consumer_list(root):
    Consumer.objects.create(
        queue="shop-emails", handler="x.y", lease=30, max_attempts=3,
        retry_policy={f"k{i}": i for i in range(2_000)},
    )  # fmt: skip
    html = client_for(make_user("viewer", *VIEW_PERMS)).get(CONSUMERS).content.decode()
    assert "k0=0" in html and "k1999" not in html
    assert "more characters" in html
