"""Periodic jobs: each tick enqueued once, missed ticks collapse, bad entries fail the check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import checks
from django.core.management import call_command
from django.test import override_settings

from django_alkqueue.models import PeriodicTick, QueueMessage
from django_alkqueue.periodic import PeriodicService, latest_tick
from tests.clocks import FakeClock
from tests.conftest import run_threads

pytestmark = pytest.mark.django_db

PING = {"ping": {"cron": "*/5 * * * *", "queue": "health", "payload": {"ping": True}}}
NIGHTLY = {"nightly": {"cron": "0 3 * * *", "task": "testproject.shop.tasks.add",
                       "args": [1, 2], "queue": "default"}}  # fmt: skip


def at(hour: int, minute: int, second: int = 0) -> FakeClock:
    return FakeClock(datetime(2030, 1, 1, hour, minute, second, tzinfo=UTC))


def test_latest_tick_is_the_most_recent_at_or_before_now():
    now = datetime(2030, 1, 1, 12, 7, 30, tzinfo=UTC)
    assert latest_tick("*/5 * * * *", now) == datetime(2030, 1, 1, 12, 5, tzinfo=UTC)


@override_settings(ALKQUEUE={"PERIODIC": PING})
def test_a_tick_is_enqueued_once():
    clock = at(12, 7)
    scheduler = PeriodicService("default", clock)
    assert scheduler.run_once() == ["ping"]
    assert scheduler.run_once() == []
    clock.advance(60)  # 12:08: same tick
    assert scheduler.run_once() == []
    assert list(QueueMessage.objects.values_list("queue", "payload")) == [
        ("health", {"ping": True})
    ]


@override_settings(ALKQUEUE={"PERIODIC": PING})
def test_a_tick_is_not_enqueued_again_after_its_job_ran():
    clock = at(12, 7)
    scheduler = PeriodicService("default", clock)
    scheduler.run_once()
    QueueMessage.objects.all().delete()  # the job ran and left the table
    assert scheduler.run_once() == []
    clock.advance(minutes=3)  # 12:10: the next tick
    assert scheduler.run_once() == ["ping"]
    assert PeriodicTick.objects.get(name="ping").last_tick == datetime(
        2030, 1, 1, 12, 10, tzinfo=UTC
    )


@override_settings(ALKQUEUE={"PERIODIC": PING})
def test_missed_ticks_collapse_into_the_most_recent_one():
    clock = at(12, 7)
    PeriodicService("default", clock).run_once()
    clock.advance(hours=2)  # 24 ticks missed while no worker ran
    assert PeriodicService("default", clock).run_once() == ["ping"]
    assert QueueMessage.objects.count() == 2
    assert PeriodicTick.objects.get(name="ping").last_tick == datetime(
        2030, 1, 1, 14, 5, tzinfo=UTC
    )


@override_settings(ALKQUEUE={"PERIODIC": NIGHTLY})
def test_a_task_schedule_enqueues_the_task_through_the_backend():
    PeriodicService("default", at(4, 0)).run_once()
    job = QueueMessage.objects.get()
    assert job.payload["task"] == "testproject.shop.tasks.add"
    assert job.payload["args"] == [1, 2]


@override_settings(ALKQUEUE={"PERIODIC": PING})
def test_three_schedulers_racing_enqueue_each_tick_once(transactional_db):
    clock = at(12, 7)
    ran: list[list[str]] = []
    for _ in range(3):  # three ticks, three racing schedulers each
        run_threads(3, lambda i: ran.append(PeriodicService("default", clock).run_once()))
        clock.advance(minutes=5)
    assert QueueMessage.objects.count() == 3
    assert sum(len(names) for names in ran) == 3


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"cron": "not a cron", "payload": 1}, "invalid cron"),
        ({"cron": "* * * * *", "task": "nowhere.task"}, "unknown task"),
        ({"cron": "* * * * *"}, "needs a 'task' or a 'payload'"),
        ({"payload": 1}, "needs a 'cron'"),
        ({"cron": "* * * * *", "payload": 1, "queue": "_x"}, "reserved"),
    ],
)
def test_a_bad_periodic_entry_fails_the_system_check(entry, message):
    with override_settings(ALKQUEUE={"PERIODIC": {"broken-entry": entry}}):
        errors = [m for m in checks.run_checks(tags=["alkqueue"]) if m.id == "alkqueue.E002"]
    assert len(errors) == 1
    assert message in errors[0].msg and "broken-entry" in errors[0].msg


@pytest.mark.django_db(transaction=True)
def test_manage_py_check_fails_on_a_bad_cron_entry():
    # No transaction of the test's open: on SQLite it would hold the write lock, and the
    # subprocess's check would wait out its 30 s busy timeout for it.
    from tests.workers import run_manage

    result = run_manage("check", env_extra={"ALKQUEUE_BAD_CRON": "1"})
    assert result.returncode != 0
    assert "alkqueue.E002" in result.stderr and "nightly-broken" in result.stderr


@override_settings(ALKQUEUE={"PERIODIC": {**PING, **NIGHTLY}})
def test_alk_periodic_lists_schedules_with_next_run_times(capsys):
    call_command("alk_periodic")
    out = capsys.readouterr().out
    assert "ping" in out and "*/5 * * * *" in out and "nightly" in out
    assert "task testproject.shop.tasks.add" in out


def test_next_tick_follows_the_project_time_zone():
    from django_alkqueue.periodic import next_tick

    with override_settings(TIME_ZONE="America/New_York"):
        tick = next_tick("0 3 * * *", datetime(2030, 1, 1, 12, 0, tzinfo=UTC))
    assert tick.utcoffset() == timedelta(hours=-5)
    assert (tick.hour, tick.astimezone(UTC).hour) == (3, 8)


def test_one_failing_schedule_does_not_hold_up_the_others(caplog):
    broken = {"a-broken": {"cron": "*/5 * * * *", "queue": "health", "payload": {1, 2}}}
    with override_settings(ALKQUEUE={"PERIODIC": {**broken, **PING}}):
        assert PeriodicService("default", at(12, 7)).run_once() == ["ping"]
    assert "a-broken" in caplog.text


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"cron": "* * * * *", "task": "testproject.shop.tasks.add", "queue": "shop-emails"},
         "not valid for backend"),
        ({"cron": "* * * * *", "task": "testproject.shop.consumers.send_email"}, "not a @task"),
    ],
)  # fmt: skip
def test_a_task_entry_its_backend_cannot_run_fails_the_check(entry, message):
    with override_settings(ALKQUEUE={"PERIODIC": {"bad-task": entry}}):
        errors = [m for m in checks.run_checks(tags=["alkqueue"]) if m.id == "alkqueue.E002"]
    assert len(errors) == 1 and message in errors[0].msg
