"""Periodic schedules in the admin (docs/periodic.md, "In the admin"): listed read-only with
their last and next ticks, paused and resumed by users with pause_periodictick; a paused
schedule's ticks pass without a job and a resume does not fire the missed ones."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.test import override_settings

from django_alkqueue.models import PeriodicTick, QueueMessage
from django_alkqueue.periodic import PeriodicService, ensure_rows, set_paused
from tests.admin_helpers import client_for, make_user
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db

PERIODIC = {
    "ping": {"cron": "*/5 * * * *", "queue": "health", "payload": {"ping": True}},
    "nightly": {"cron": "0 3 * * *", "queue": "health", "payload": {"nightly": True}},
}
SCHEDULES = "/admin/django_alkqueue/periodictick/"


def pings() -> int:
    """The ping schedule's jobs (payloads compared in Python: MySQL stores them as text)."""
    return sum(job.payload == {"ping": True} for job in QueueMessage.objects.filter(queue="health"))


def at(hour: int, minute: int) -> FakeClock:
    return FakeClock(datetime(2030, 1, 1, hour, minute, tzinfo=UTC))


@override_settings(ALKQUEUE={"PERIODIC": PERIODIC})
def test_a_paused_schedule_enqueues_nothing_at_its_tick():
    set_paused("default", ["ping"], True)

    assert PeriodicService("default", at(12, 7)).run_once() == ["nightly"]
    assert pings() == 0


@override_settings(ALKQUEUE={"PERIODIC": PERIODIC})
def test_a_resumed_schedule_does_not_fire_the_ticks_missed_while_paused():
    clock = at(12, 7)
    scheduler = PeriodicService("default", clock)
    scheduler.run_once()  # 12:05 enqueued
    set_paused("default", ["ping"], True)
    clock.advance(minutes=10)  # 12:17: the 12:10 and 12:15 ticks pass while paused
    scheduler.run_once()
    set_paused("default", ["ping"], False)

    assert scheduler.run_once() == []  # 12:15 is not fired by the resume
    clock.advance(minutes=3)  # 12:20
    assert scheduler.run_once() == ["ping"]
    assert pings() == 2


@override_settings(ALKQUEUE={"PERIODIC": PERIODIC})
def test_a_listed_schedule_that_never_ticked_ticks_like_a_new_one():
    ensure_rows("default", ["ping"])
    assert PeriodicTick.objects.get(name="ping").last_tick is None

    assert "ping" in PeriodicService("default", at(12, 7)).run_once()
    assert PeriodicTick.objects.get(name="ping").last_tick == datetime(
        2030, 1, 1, 12, 5, tzinfo=UTC
    )


@override_settings(ALKQUEUE={"PERIODIC": PERIODIC})
def test_the_admin_lists_every_configured_schedule_with_its_ticks(root):
    PeriodicService("default", at(12, 7)).run_once()
    PeriodicTick.objects.filter(name="nightly").delete()  # configured, not ticked yet

    page = root.get(SCHEDULES).content.decode()

    assert "ping" in page and "nightly" in page
    assert "not ticked yet" in page
    assert "*/5 * * * *" in page and "payload {&#x27;ping&#x27;: True} on health" in page


@override_settings(ALKQUEUE={"PERIODIC": PERIODIC})
def test_pausing_from_the_admin_needs_its_permission_and_is_logged(root):
    ensure_rows("default", ["ping", "nightly"])
    ping = PeriodicTick.objects.get(name="ping")
    viewer = client_for(make_user("viewer", "view_periodictick"))
    body = {"action": "pause", "_selected_action": [ping.pk]}

    refused = viewer.post(SCHEDULES, body)
    assert refused.status_code == 403
    assert not PeriodicTick.objects.get(name="ping").paused

    root.post(SCHEDULES, body)
    assert PeriodicTick.objects.get(name="ping").paused
    assert not PeriodicTick.objects.get(name="nightly").paused
    assert LogEntry.objects.order_by("-id").first().change_message.startswith("pause")


def test_a_viewer_sees_no_pause_action():
    viewer = client_for(make_user("viewer", "view_periodictick"))

    page = viewer.get(SCHEDULES).content.decode()

    assert 'value="pause"' not in page


@override_settings(ALKQUEUE={"PERIODIC": PERIODIC})
def test_alk_periodic_says_a_paused_schedule_is_paused():
    set_paused("default", ["ping"], True)
    out = io.StringIO()

    call_command("alk_periodic", stdout=out)

    (line,) = [row for row in out.getvalue().splitlines() if row.startswith("ping")]
    assert line.rstrip().endswith("paused")
