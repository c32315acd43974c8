"""Signals and sleeps in the admin (docs/admin.md, "Steps"): a job waiting for a signal shows
which and until when, and a user with signal_queuemessage sends it one through Send signal
(JSON checked: a bad payload shows the form again and writes nothing; audited); the Steps
section reads sleeps and waits out in words; the overview and alk_status count the sleeping
jobs among the scheduled ones."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import JobSignal, JobStep, QueueMessage
from django_alkqueue.queues import JobHandle
from tests.admin_helpers import JOBS, OVERVIEW, VIEW_PERMS, client_for, make_user

pytestmark = pytest.mark.django_db


def waiting(name: str = "approved", deadline: datetime | None = None) -> JobHandle:
    q = queue("orders", lease=60)
    q.enqueue({"n": 1})
    (handle,) = q.claim("tests:1")
    assert handle.wait(name, deadline)
    return handle


def sleeping(until: datetime) -> JobHandle:
    q = queue("orders", lease=60)
    q.enqueue({"n": 1})
    (handle,) = q.claim("tests:1")
    value = {"sleep_until": until.isoformat()}
    JobStep.objects.create(job_id=handle.job.id, name="nap", attempt=1, duration=0.0,
                           value=value, recorded_at=timezone.now())  # fmt: skip
    assert handle.sleep(until)
    return handle


def signal_page(job_id: int) -> str:
    return f"{JOBS}{job_id}/signal/"


@pytest.fixture
def root():
    return client_for(make_user("root", superuser=True))


@pytest.fixture
def signaller():
    return client_for(make_user("signaller", *VIEW_PERMS, "signal_queuemessage"))


def test_a_waiting_jobs_page_names_the_signal_and_its_deadline(root):
    deadline = timezone.now() + timedelta(days=7)
    handle = waiting(deadline=deadline)

    html = root.get(f"{JOBS}{handle.job.id}/change/").content.decode()

    assert 'id="alk-signal"' in html
    assert "Waits for the signal <code>approved</code>." in html
    assert "Deadline: " in html and deadline.isoformat() in html
    assert 'id="alk-send-signal"' in html


def test_a_job_waiting_for_a_signal_runs_when_the_signal_comes_in_the_list_and_on_its_page(
    root,
):
    handle = waiting()

    listed = root.get(JOBS).content.decode()
    page = root.get(f"{JOBS}{handle.job.id}/change/").content.decode()

    for html in (listed, page):
        assert "when the signal &#x27;approved&#x27; comes" in html
        assert "when its dependencies are done" not in html


def test_a_pending_job_has_no_signal_section(root):
    job = queue("orders").enqueue({})
    assert 'id="alk-signal"' not in root.get(f"{JOBS}{job.id}/change/").content.decode()


def test_send_signal_delivers_it_and_the_job_becomes_pending(signaller):
    handle = waiting()

    response = signaller.post(signal_page(handle.job.id),
                              {"name": "approved", "payload": '{"by": "ops"}'})  # fmt: skip

    assert response.status_code == 302
    sent = JobSignal.objects.get(job_id=handle.job.id)
    assert sent.name == "approved" and sent.payload == {"by": "ops"}
    job = QueueMessage.objects.get(id=handle.job.id)
    assert job.run_at <= timezone.now()


def test_send_signal_is_audited(signaller):
    handle = waiting()

    signaller.post(signal_page(handle.job.id), {"name": "approved", "payload": "null"})

    entry = LogEntry.objects.order_by("-id").first()
    assert entry is not None and "signal 'approved'" in entry.change_message


def test_the_form_offers_the_signal_the_job_waits_for(signaller):
    handle = waiting()

    html = signaller.get(signal_page(handle.job.id)).content.decode()

    assert 'value="approved"' in html


def test_a_bad_json_payload_shows_the_form_again_and_writes_nothing(signaller):
    handle = waiting()
    entries = LogEntry.objects.count()

    response = signaller.post(signal_page(handle.job.id),
                              {"name": "approved", "payload": "{by: ops"})  # fmt: skip

    assert response.status_code == 200
    assert "Not JSON" in response.content.decode()
    assert not JobSignal.objects.exists() and LogEntry.objects.count() == entries


def test_a_bad_signal_name_shows_the_form_again_and_writes_nothing(signaller):
    handle = waiting()

    response = signaller.post(signal_page(handle.job.id), {"name": "a\x00b", "payload": "1"})

    assert response.status_code == 200
    assert not JobSignal.objects.exists()


def test_send_signal_without_the_permission_is_a_403_and_writes_nothing():
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    handle = waiting()

    assert viewer.get(signal_page(handle.job.id)).status_code == 403
    assert viewer.post(signal_page(handle.job.id), {"name": "approved", "payload": "1"}
                       ).status_code == 403  # fmt: skip
    assert not JobSignal.objects.exists()
    page = viewer.get(f"{JOBS}{handle.job.id}/change/").content.decode()
    assert 'id="alk-signal"' in page and 'id="alk-send-signal"' not in page


def test_a_signal_to_a_job_that_has_one_of_that_name_is_not_sent(signaller):
    handle = waiting()
    assert queue("orders").signal(handle.job.id, "other", 1)

    response = signaller.post(signal_page(handle.job.id), {"name": "other", "payload": "2"},
                              follow=True)  # fmt: skip

    assert "Not sent" in response.content.decode()
    assert JobSignal.objects.get(name="other").payload == 1


def test_the_steps_section_reads_sleeps_and_waits_in_words(root):
    job = queue("orders").enqueue({})
    at = datetime(2031, 3, 10, 12, 0, tzinfo=UTC)
    for name, value in (("nap", {"sleep_until": at.isoformat()}), ("approved", {"signal": 1}),
                        ("review", {"timed_out": at.isoformat()})):  # fmt: skip
        JobStep.objects.create(job_id=job.id, name=name, value=value, recorded_at=at,
                               attempt=1, duration=0.0)  # fmt: skip

    html = root.get(f"{JOBS}{job.id}/change/").content.decode()

    assert "sleeps until <time" in html
    assert "signal &#x27;approved&#x27; received" in html
    assert "timed out at <time" in html


def test_the_overview_counts_sleeping_jobs_among_the_scheduled(root):
    sleeping(timezone.now() + timedelta(hours=1))
    queue("orders").enqueue({}, run_at=timezone.now() + timedelta(hours=1))

    html = root.get(OVERVIEW).content.decode()

    assert '<span data-figure="sleeping">1</span> sleeping' in html


def test_alk_status_json_counts_sleeping_jobs(capsys):
    sleeping(timezone.now() + timedelta(hours=1))
    queue("orders").enqueue({}, run_at=timezone.now() + timedelta(hours=1))

    call_command("alk_status", "--json")

    (row,) = [q for q in json.loads(capsys.readouterr().out)["queues"] if q["queue"] == "orders"]
    assert row["scheduled"] == 2 and row["sleeping"] == 1


def test_a_job_woken_whose_later_step_was_recorded_is_not_sleeping(capsys):
    handle = sleeping(timezone.now() + timedelta(hours=1))
    JobStep.objects.create(job_id=handle.job.id, name="after", value=1, attempt=1, duration=0.0,
                           recorded_at=timezone.now() + timedelta(seconds=1))  # fmt: skip

    call_command("alk_status", "--json")

    (row,) = json.loads(capsys.readouterr().out)["queues"]
    assert row["scheduled"] == 1 and row["sleeping"] == 0
