"""The server-side SVG charts: pure functions over QueueStat points, no database."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import timings
from django_alkqueue.admin.charts import (
    DEFAULT_WINDOW,
    WINDOWS,
    bucketize,
    nice_ticks,
    sparkline,
    window_from,
)
from django_alkqueue.admin.queue_charts import depth_chart, throughput_chart, timing_chart
from django_alkqueue.reports.queue_stats import StatPoint

NOW = datetime(2030, 1, 1, 12, 0, 30, tzinfo=UTC)
ONE_HOUR = WINDOWS["1h"]

pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def utc():
    with override_settings(TIME_ZONE="UTC", USE_TZ=True):
        yield


def point(minutes_ago: float, pending: int = 0, finished: int = 0, failed: int = 0, **more):
    return StatPoint(
        NOW.replace(second=0) - timedelta(minutes=minutes_ago), pending, finished, failed, 0,
        pending=pending, **more,
    )  # fmt: skip


def titles(svg: str) -> list[str]:
    return re.findall(r"<title>([^<]*)</title>", svg)


# -- windows and buckets ---------------------------------------------------------------------


def test_each_window_has_its_bucket_size():
    sizes = {key: (w.count, w.bucket_words) for key, w in WINDOWS.items()}
    assert sizes == {"1h": (60, "1 min"), "6h": (72, "5 min"), "24h": (144, "10 min"),
                     "7d": (168, "1 h")}  # fmt: skip


def test_an_unknown_window_falls_back_to_24_hours():
    assert window_from("2y") is DEFAULT_WINDOW and window_from(None) is DEFAULT_WINDOW


def test_one_minute_buckets_end_with_the_current_minute():
    buckets = bucketize([point(0, pending=3), point(1, finished=2)], NOW, ONE_HOUR)
    assert buckets[-1].start == NOW.replace(second=0) and buckets[-1].depth == 3
    assert buckets[-2].finished == 2


def test_minutes_land_in_ten_minute_buckets_and_the_last_reading_wins():
    buckets = bucketize([point(25, 7, 1), point(21, 9, 2, 1), point(5, 3)], NOW)
    assert len(buckets) == 144
    # 11:35 and 11:39 share 11:30 to 11:40; 11:55 is in the bucket before the current one.
    assert (buckets[-4].depth, buckets[-4].finished, buckets[-4].failed) == (9, 3, 1)
    assert buckets[-2].depth == 3 and buckets[-1].depth is None and buckets[-3].depth is None


def test_minutes_outside_the_window_are_left_out():
    buckets = bucketize([point(61, 50, 9), point(-2, 60, 9)], NOW, ONE_HOUR)
    assert all(b.depth is None and b.finished == 0 for b in buckets)


# -- axes and scales ---------------------------------------------------------------------------


def test_ticks_step_by_one_two_or_five_times_a_power_of_ten():
    assert nice_ticks(213) == [0, 100, 200, 300]
    assert nice_ticks(7) == [0, 2, 4, 6, 8]
    assert nice_ticks(0) == [0, 1]


def test_time_ticks_are_whole_seconds_fractions_for_durations():
    assert nice_ticks(0.045, integers=False) == [0, 0.02, 0.04, 0.06]


def test_the_throughput_chart_has_a_y_axis_with_its_ticks_and_unit():
    svg = throughput_chart("q", bucketize([point(5, finished=150, failed=63)], NOW), DEFAULT_WINDOW)
    labels = re.findall(r'text-anchor="end">([^<]*)</text>', svg)
    assert labels == ["0", "100", "200", "300"]
    assert "Jobs per 10 min" in svg


def test_the_time_axis_is_labelled_in_the_site_time_zone():
    svg = throughput_chart("q", bucketize([], NOW, ONE_HOUR), ONE_HOUR)
    labels = re.findall(r'text-anchor="middle">([^<]*)</text>', svg)
    assert labels == ["11:10", "11:20", "11:30", "11:40", "11:50", "12:00"]


def test_the_seven_day_axis_names_the_days():
    svg = throughput_chart("q", bucketize([], NOW, WINDOWS["7d"]), WINDOWS["7d"])
    assert "Tue 1<" in svg  # 2030-01-01 was a Tuesday


# -- series ------------------------------------------------------------------------------------


def test_a_series_with_one_value_is_drawn_as_a_point():
    svg = depth_chart("q", bucketize([point(5, pending=2)], NOW), DEFAULT_WINDOW)
    assert svg.count('<circle class="alk-dot alk-pending"') == 1
    assert "<path" not in svg


def test_the_depth_line_breaks_where_no_reading_was_taken():
    svg = depth_chart("q", bucketize([point(50, 1), point(40, 2), point(5, 4)], NOW),
                      DEFAULT_WINDOW)  # fmt: skip
    path = svg.split('class="alk-line alk-pending" d="')[1].split('"')[0]
    assert path.count("M") == 1 and path.count("L") == 1
    assert svg.count('<circle class="alk-dot alk-pending"') == 1  # the lone reading at 5


def test_failed_bars_stack_on_finished_bars_in_their_own_class():
    svg = throughput_chart("q", bucketize([point(5, finished=4, failed=2)], NOW), DEFAULT_WINDOW)
    assert svg.count('class="alk-bar alk-finished"') == 1
    assert svg.count('class="alk-bar alk-failed"') == 1


# -- tooltips, legends, text alternatives ---------------------------------------------------


def test_each_bucket_has_a_tooltip_with_its_time_and_figures():
    svg = throughput_chart(
        "q", bucketize([point(0, finished=40, failed=3)], NOW, ONE_HOUR), ONE_HOUR
    )
    tips = titles(svg)[1:]
    assert len(tips) == 60
    assert tips[-1] == "12:00 to 12:01: finished 40, failed 3"


def test_the_legend_counts_failed_apart_from_finished():
    points = [point(5, finished=132, failed=81), point(15, finished=10, failed=2)]
    html = throughput_chart("q", bucketize(points, NOW), DEFAULT_WINDOW)
    assert "finished (succeeded): 142 in 24 h, at most 132 per 10 min" in html
    assert "failed attempts (retried or dead-lettered): 83 in 24 h, at most 81 per 10 min" in html


def test_the_depth_legend_gives_each_state_its_figures():
    html = depth_chart("q", bucketize([point(5, pending=4, scheduled=2, claimed=1)], NOW),
                       DEFAULT_WINDOW)  # fmt: skip
    assert "pending (due, waiting for a worker): now 4, at most 4" in html
    assert "scheduled (due later): now 2, at most 2" in html
    assert "running (claimed): now 1, at most 1" in html


def test_a_chart_is_an_image_with_a_name_and_a_description_and_escapes_the_queue():
    svg = throughput_chart("<b>&", bucketize([point(5, finished=3, failed=1)], NOW),
                           DEFAULT_WINDOW)  # fmt: skip
    assert 'role="img"' in svg
    assert 'aria-label="&lt;b&gt;&amp;, throughput over the last 24 h: finished 3, failed 1"' in svg
    assert "<desc>Jobs per 10 min; failed bars are stacked on finished ones.</desc>" in svg


def test_the_wait_chart_draws_p50_and_p95_from_the_histograms():
    wait = [0] * timings.BINS
    wait[timings.bin_of(0.02)] = 90
    wait[timings.bin_of(2.0)] = 10
    svg = timing_chart("q", bucketize([point(5, wait=tuple(wait))], NOW), DEFAULT_WINDOW, "wait")
    assert svg.count('<circle class="alk-dot alk-p50"') == 1
    assert svg.count('<circle class="alk-dot alk-p95"') == 1
    assert "p50 18 ms, p95 1.73 s (100 jobs)" in svg


def test_the_run_chart_reads_the_handler_duration_histogram_of_the_metrics():
    # 90 calls within (5 ms, 25 ms], 10 within (1 s, 5 s]: duration_le_* as the scrape reads
    run = timings.run_bins(100, [0, 90, 90, 90, 90, 100, 100, 100])
    svg = timing_chart("q", bucketize([point(5, run=run)], NOW), DEFAULT_WINDOW, "run")
    assert svg.count('<circle class="alk-dot alk-p50"') == 1
    assert "(100 jobs)" in svg and "as exported at /metrics/" in svg


def test_the_run_chart_reads_handlers_of_one_second_within_a_quarter_of_a_second():
    # 60 calls of 1.0 s and a little: all in the (1 s, 5 s] bin, 60.3 s in all
    run = timings.run_bins(60, [0, 0, 0, 0, 0, 60, 60, 60])
    bucket = point(5, run=run, run_seconds=60.3)
    svg = timing_chart("q", bucketize([bucket], NOW), DEFAULT_WINDOW, "run")
    p50, p95 = map(float, re.findall(r"p50 ([\d.]+) s, p95 ([\d.]+) s \(60 jobs\)", svg)[0])
    assert 0.75 <= p50 <= 1.25 and 0.75 <= p95 <= 1.25


@pytest.mark.parametrize(
    ("zone", "label"),
    [("UTC", "UTC"), ("Europe/Berlin", "CET"), ("America/Sao_Paulo", "UTC-03")],
)
def test_the_time_axis_names_its_time_zone(zone, label):
    with timezone.override(zone):
        svg = throughput_chart("q", bucketize([point(5, finished=1)], NOW), DEFAULT_WINDOW)
    assert f'text-anchor="start">{label}</text>' in svg


def test_the_sparkline_writes_each_bands_peak_with_its_unit_and_the_windows_ends():
    points = [point(25, pending=40, finished=7, failed=2), point(5, pending=12, finished=3)]
    svg = sparkline("q", bucketize(points, NOW))
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", svg)
    assert texts == ["40 jobs", "9 per 10 min", "24 h ago", "now"]


def test_the_sparkline_draws_a_lone_reading_and_states_its_window():
    svg = sparkline("q", bucketize([point(5, pending=2)], NOW, ONE_HOUR), ONE_HOUR)
    assert '<circle class="alk-dot alk-depth"' in svg
    assert "<title>q, last 1 h: depth now 2, at most 2; finished 0, failed 0</title>" in svg


def test_an_empty_history_draws_no_series():
    html = depth_chart("q", bucketize([], NOW), DEFAULT_WINDOW)
    assert "<path" not in html and "<circle" not in html and "no reading" in html


# -- timings -------------------------------------------------------------------------------------


def test_times_fall_in_the_first_bin_not_below_them():
    assert timings.bin_of(0.0) == 0 and timings.bin_of(0.01) == 0
    assert timings.bin_of(0.011) == 1 and timings.bin_of(7200) == timings.BINS - 1


def test_a_percentile_interpolates_within_its_bin():
    counts = [0] * timings.BINS
    counts[timings.bin_of(2.0)] = 10  # (1 s, 3 s]
    assert timings.percentile(counts, 0.5) == pytest.approx(3**0.5)
    assert timings.percentile([0] * timings.BINS, 0.5) is None


def test_the_run_bins_are_the_cumulative_duration_columns_apart():
    assert timings.run_bins(7, [1, 1, 3, 3, 3, 3, 3, 5]) == (1, 0, 2, 0, 0, 0, 0, 2, 2)
    assert timings.percentile((0, 10, 0, 0, 0, 0, 0, 0, 0), 0.5, timings.RUN_BOUNDS) == (
        pytest.approx((0.005 * 0.025) ** 0.5)
    )


def test_the_total_time_places_a_percentile_within_its_bin():
    one_bin = timings.run_bins(10, [0, 0, 0, 0, 0, 10, 10, 10])  # (1 s, 5 s]
    assert timings.percentile(one_bin, 0.5, timings.RUN_BOUNDS) == pytest.approx(5**0.5)
    assert timings.percentile(one_bin, 0.95, timings.RUN_BOUNDS, 10.0) == pytest.approx(1, rel=0.02)
    assert timings.percentile(one_bin, 0.5, timings.RUN_BOUNDS, 49.9) == pytest.approx(5, rel=0.02)


def test_a_total_the_other_bins_take_up_leaves_the_estimate_in_its_bin():
    # 90 calls of 6 ms, 10 of 1.0 s
    run = timings.run_bins(100, [0, 90, 90, 90, 90, 100, 100, 100])
    seconds = 90 * 0.006 + 10 * 1.0
    assert 0.005 <= timings.percentile(run, 0.5, timings.RUN_BOUNDS, seconds) <= 0.025
    assert timings.percentile(run, 0.95, timings.RUN_BOUNDS, seconds) == pytest.approx(1, rel=0.05)
    assert timings.percentile(run, 0.5, timings.RUN_BOUNDS, 0.0) == pytest.approx(0.005, rel=0.02)


def test_the_open_last_bin_reads_the_mean_its_total_leaves_when_above_its_edge():
    over = timings.run_bins(10, [0] * 8)
    assert timings.percentile(over, 0.5, timings.RUN_BOUNDS) == 300
    assert timings.percentile(over, 0.5, timings.RUN_BOUNDS, 6000.0) == pytest.approx(600)


def test_durations_read_in_their_best_unit():
    assert [timings.duration_words(s) for s in (0.04, 1.5, 150, 4320)] == [
        "40 ms", "1.5 s", "2.5 min", "1.2 h",
    ]  # fmt: skip
