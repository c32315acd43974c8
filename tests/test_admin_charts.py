"""The server-side SVG charts: pure functions over QueueStat points, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django_alkqueue.admin.charts import BUCKETS, bucketize, render
from django_alkqueue.status import StatPoint

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def point(minutes_ago: float, depth: int, finished: int = 0, failed: int = 0) -> StatPoint:
    return StatPoint(NOW - timedelta(minutes=minutes_ago), depth, finished, failed, 0)


def test_minutes_land_in_ten_minute_buckets_and_the_last_reading_wins():
    buckets = bucketize([point(25, 7, 1), point(21, 9, 2, 1), point(5, 3)], NOW)
    assert len(buckets) == BUCKETS
    assert (buckets[-3].depth, buckets[-3].finished, buckets[-3].failed) == (9, 3, 1)
    assert buckets[-1].depth == 3
    assert buckets[-2].depth is None


def test_minutes_outside_the_24_hours_are_left_out():
    buckets = bucketize([point(24 * 60 + 1, 50, 9), point(-1, 60, 9)], NOW)
    assert all(b.depth is None and b.finished == 0 for b in buckets)


def test_the_depth_line_breaks_where_no_reading_was_taken():
    svg = render("shop-emails", bucketize([point(50, 1), point(35, 2), point(5, 4)], NOW))
    path = svg.split(' d="')[1].split('"')[0]
    assert path.count("M") == 2 and path.count("L") == 1


def test_failed_bars_stack_on_finished_bars_in_their_own_colour():
    svg = render("shop-emails", bucketize([point(5, 1, finished=4, failed=2)], NOW))
    assert svg.count("<rect") == 3  # the background, finished, failed
    assert 'fill="#ba2121"' in svg and 'fill="#5b9a2a"' in svg


def test_the_title_summarises_the_day_and_is_escaped():
    svg = render("<b>&", bucketize([point(5, 4, finished=3, failed=1)], NOW))
    assert (
        "<title>&lt;b&gt;&amp;, last 24 h: depth now 4, max 4; finished 3, failed 1</title>" in svg
    )


def test_an_empty_history_renders_an_empty_chart():
    svg = render("shop-emails", bucketize([], NOW))
    assert "no depth data" in svg and "<path" not in svg


def test_the_detail_chart_has_scales_and_a_time_axis():
    svg = render("shop-emails", bucketize([point(5, 12, finished=30)], NOW), 720, 180, labels=True)
    assert "depth (max 12)" in svg and "failed, per 10 min (max 30)" in svg
    assert "24 h ago" in svg and ">now<" in svg
