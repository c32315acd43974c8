"""Periodic ticks across daylight-saving changes (Europe/Berlin, 2030), with a moved clock.

The rule: a schedule that fires every hour keeps firing by real time, so in the hour repeated
when the clocks go back it fires in both copies; any other schedule fires once, in the first
copy. A tick in the hour skipped when the clocks go forward fires once, when the gap ends.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from django_alkqueue.models import QueueMessage
from django_alkqueue.periodic import PeriodicService, latest_tick, next_tick
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db

BERLIN = "Europe/Berlin"
# 2030-10-27 01:00 UTC: 03:00 CEST -> 02:00 CET, 02:00-03:00 comes twice.
FALL_BACK = datetime(2030, 10, 27, 1, 0, tzinfo=UTC)
# 2030-03-31 01:00 UTC: 02:00 CET -> 03:00 CEST, 02:00-03:00 does not exist.
SPRING_FORWARD = datetime(2030, 3, 31, 1, 0, tzinfo=UTC)


def utc(day: datetime, hour: int, minute: int, days: int = 0) -> datetime:
    return day.replace(hour=hour, minute=minute) + timedelta(days=days)


def ticks_enqueued(cron: str, start: datetime, end: datetime) -> list[datetime]:
    """Run one scheduler every 5 minutes from `start` to `end`; the ticks it enqueued (UTC)."""
    clock = FakeClock(start)
    scheduler = PeriodicService("default", clock)
    entry = {"cron": cron, "queue": "health", "payload": {}}
    with override_settings(TIME_ZONE=BERLIN, ALKQUEUE={"PERIODIC": {"s": entry}}):
        while clock.now <= end:
            scheduler.run_once()
            clock.advance(minutes=5)
    keys = QueueMessage.objects.order_by("id").values_list("unique_key", flat=True)
    return [datetime.fromisoformat(key.split(":", 2)[2]).astimezone(UTC) for key in keys]


def test_an_every_half_hour_schedule_fires_in_both_copies_of_the_repeated_hour():
    ticks = ticks_enqueued("*/30 * * * *", utc(FALL_BACK, 0, 10), utc(FALL_BACK, 2, 10))
    # 02:00 CEST, 02:30 CEST, 02:00 CET, 02:30 CET, 03:00 CET: every real half hour.
    assert ticks == [utc(FALL_BACK, h, m) for h, m in [(0, 0), (0, 30), (1, 0), (1, 30), (2, 0)]]


def test_a_daily_schedule_in_the_repeated_hour_fires_once_in_its_first_copy():
    ticks = ticks_enqueued("30 2 * * *", utc(FALL_BACK, 0, 0), utc(FALL_BACK, 3, 0))
    # the day before at 02:30 CEST (the first pass), then 02:30 CEST only.
    assert ticks == [utc(FALL_BACK, 0, 30, days=-1), utc(FALL_BACK, 0, 30)]


def test_a_daily_schedule_in_the_skipped_hour_fires_once_when_the_gap_ends():
    ticks = ticks_enqueued("30 2 * * *", utc(SPRING_FORWARD, 0, 0), utc(SPRING_FORWARD, 3, 0))
    # the day before at 02:30 CET, then 03:00 CEST: 02:30 never comes that night.
    assert ticks == [utc(SPRING_FORWARD, 1, 30, days=-1), utc(SPRING_FORWARD, 1, 0)]


def test_the_ticks_of_the_skipped_hour_fire_once_when_the_gap_ends():
    ticks = ticks_enqueued("*/30 * * * *", utc(SPRING_FORWARD, 0, 10), utc(SPRING_FORWARD, 1, 40))
    # 01:30 CET, then 02:00, 02:30 and 03:00 all at 03:00 CEST, then 03:30 CEST.
    assert ticks == [utc(SPRING_FORWARD, 0, 0), utc(SPRING_FORWARD, 0, 30),
                     utc(SPRING_FORWARD, 1, 0), utc(SPRING_FORWARD, 1, 30)]  # fmt: skip


@pytest.mark.parametrize("cron", ["*/30 * * * *", "30 2 * * *", "0 * * * *", "15 1-3 * * *"])
@pytest.mark.parametrize("change", [FALL_BACK, SPRING_FORWARD])
def test_latest_and_next_tick_agree_and_move_forward_across_a_change(cron, change):
    def latest(at: datetime) -> datetime:  # compared in UTC: within one zone, Python
        return latest_tick(cron, at).astimezone(UTC)  # ignores the fold of a repeated hour

    def upcoming(at: datetime) -> datetime:
        return next_tick(cron, at).astimezone(UTC)

    now, previous = change - timedelta(hours=4), change - timedelta(days=2)
    with override_settings(TIME_ZONE=BERLIN):
        while now < change + timedelta(hours=4):
            assert previous <= latest(now) <= now < upcoming(now)
            assert latest(upcoming(now)) == upcoming(now)
            assert upcoming(latest(now)) == upcoming(now)
            previous, now = latest(now), now + timedelta(minutes=7)
