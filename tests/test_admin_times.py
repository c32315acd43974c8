"""One way of showing a time on every page of the app (admin.times): the lists show its age
in a <time> element titled with the time, the detail pages the time then its age, both in the
site's time zone and one format."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from django_alkqueue.admin import times
from django_alkqueue.models import DeadLetter, QueueMessage
from tests.admin_helpers import DEAD, JOBS, OVERVIEW

NOON = datetime(2030, 1, 1, 12, 0, 5, tzinfo=UTC)


def test_a_past_time_reads_as_an_age_ago():
    assert times.age(NOON, NOON + timedelta(minutes=3)) == "3 min ago"


def test_a_time_ahead_reads_as_in_an_age():
    assert times.age(NOON + timedelta(minutes=5), NOON) == "in 5 min"


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_lists_time_is_its_age_titled_with_the_time_in_the_sites_zone():
    with timezone.override("Europe/Berlin"):
        html = times.when(NOON, NOON + timedelta(seconds=40))
    assert html == (
        '<time datetime="2030-01-01T12:00:05+00:00" title="2030-01-01 13:00:05 CET">40 s ago</time>'
    )


def test_a_detail_pages_time_is_the_time_then_its_age():
    with timezone.override("UTC"):
        html = times.detail(NOON, NOON + timedelta(hours=2))
    assert re.sub(r"<[^>]+>", "", html) == "2030-01-01 12:00:05 (2 h 0 min ago)"


@pytest.mark.django_db
def test_the_dead_letter_list_shows_when_each_died_as_an_age(seeded, root):
    html = root.get(DEAD).content.decode()
    cells = re.findall(r'<td class="field-died">(.*?)</td>', html)
    assert cells and all(re.fullmatch(r'<time datetime="[^"]+" title="[^"]+">\d+ s ago</time>', c)
                         for c in cells)  # fmt: skip


@pytest.mark.django_db
def test_a_job_detail_page_shows_its_times_in_the_apps_format(seeded, root):
    job = QueueMessage.objects.get(pk=seeded.pending[0])
    html = root.get(f"{JOBS}{job.pk}/change/").content.decode()
    enqueued = html.split('fieldBox field-enqueued_at_shown">')[1].split("</time>")[0]
    assert enqueued.endswith(f">{times.timestamp(job.enqueued_at)}")


@pytest.mark.django_db
def test_the_error_groups_show_first_and_last_seen_as_ages(seeded, root):
    html = root.get(f"{OVERVIEW}errors/").content.decode()
    rows = html.split('id="alk-errors"')[1].split("</table>")[0]
    assert DeadLetter.objects.exists()
    assert len(re.findall(r"<time datetime=", rows)) == 2 * rows.count("<tr data-fingerprint")


@pytest.mark.django_db
def test_a_requeued_jobs_page_shows_its_first_enqueue_and_its_requeue_apart(seeded, root):
    from django_alkqueue import queue

    job_id = seeded.dead[0]
    first = DeadLetter.objects.get(job_id=job_id).enqueued_at
    requeued = queue("shop-webhooks").requeue(job_id)
    assert requeued is not None and requeued.requeued_at is not None
    html = root.get(f"{JOBS}{job_id}/change/").content.decode()
    shown = {
        name: html.split(f'fieldBox field-{name}_shown">')[1].split("</time>")[0]
        for name in ("enqueued_at", "requeued_at")
    }
    assert shown["enqueued_at"].endswith(times.timestamp(first))
    assert shown["requeued_at"].endswith(times.timestamp(requeued.requeued_at))
    assert "Requeued at" in html
