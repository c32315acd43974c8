"""The admin's job, dead letter and finished job pages show a job's unique key and the window
its enqueue took (`unique_for`), and a live job's debounce key and deadline (issue 52)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.admin.times import timestamp
from django_alkqueue.models import DeadLetter, FinishedJob, UniqueWindow
from tests.admin_helpers import ADMIN, DEAD, JOBS, VIEW_PERMS, client_for, make_user

pytestmark = pytest.mark.django_db

FINISHED = f"{ADMIN}/finishedjob/"


@pytest.fixture
def root():
    return client_for(make_user("root", superuser=True))


def window_text(job_id: int) -> str:
    window = UniqueWindow.objects.get(job_id=job_id)
    return f"taken {timestamp(window.taken_at)}, held until {timestamp(window.lapses_at)}"


def test_the_job_page_shows_the_unique_key_and_its_window(root):
    job = queue("digests").enqueue(1, unique_key="digest:42", unique_for=timedelta(hours=1))
    assert job is not None
    html = root.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "digest:42" in html
    assert window_text(job.id) in html


def test_the_job_page_of_a_job_without_a_window_shows_none(root):
    job = queue("digests").enqueue(1, unique_key="digest:43")
    html = root.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "digest:43" in html
    assert "held until" not in html


def test_the_job_page_shows_the_debounce_key_and_deadline(root):
    job = queue("reindex").enqueue(1, debounce_key="doc-7", debounce=5, debounce_max=60)
    html = root.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "doc-7" in html
    assert "debounce deadline" in html.lower()


def test_the_dead_letter_page_shows_the_window_its_job_took(root):
    q = queue("digests")
    job = q.enqueue(1, unique_key="digest:44", unique_for=timedelta(hours=1))
    assert job is not None
    assert q.claim_one("w").fail("no mail server")
    dead = DeadLetter.objects.get(job_id=job.id)
    html = root.get(f"{DEAD}{dead.pk}/change/").content.decode()
    assert "digest:44" in html
    assert window_text(job.id) in html


def test_the_finished_job_page_shows_the_window_its_job_took(root):
    now = timezone.now()
    FinishedJob.objects.create(
        job_id=991, queue="digests", payload={}, attempts=1, max_attempts=3, backoff_base=5,
        lease=30, unique_key="digest:45", enqueued_at=now, started_at=now, finished_at=now,
        duration=0.1, worker_id="host:1", outcome="succeeded", delete_after=now + timedelta(1),
    )  # fmt: skip
    UniqueWindow.objects.create(queue="digests", unique_key="digest:45", job_id=991,
                                taken_at=now, lapses_at=now + timedelta(hours=1))  # fmt: skip
    html = root.get(f"{FINISHED}991/change/").content.decode()
    assert "digest:45" in html
    assert window_text(991) in html


@override_settings(ALKQUEUE={"QUEUES": {"shop-payments": {"sensitive": True}}})
def test_a_sensitive_queues_debounce_key_is_masked_for_a_viewer_without_view_payload(root):
    job = queue("shop-payments").enqueue(1, debounce_key="card:4111", debounce=5)
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    assert "card:4111" not in viewer.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "card:4111" in root.get(f"{JOBS}{job.id}/change/").content.decode()
