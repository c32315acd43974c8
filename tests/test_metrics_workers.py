"""The metrics' job counters after real worker processes ran the jobs: the QueueStat minutes
add up what every process did."""

from __future__ import annotations

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from django_alkqueue import queue
from django_alkqueue.reports.metrics.collector import hour_of
from django_alkqueue.reports.metrics.hour_sums import hour_sums
from tests.admin_helpers import client_for, make_user
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_kept_sums() -> None:
    hour_sums.clear()


def test_the_finished_counter_adds_up_every_worker_process():
    hour = hour_of(timezone.now())
    queue("shop-noop").enqueue_many([{"i": i} for i in range(40)])

    run_worker("--queue", "shop-noop", "--burst", "--processes", "2", "--concurrency", "2")
    response = client_for(make_user("ops", "view_queuestat")).get("/metrics/")
    if hour_of(timezone.now()) != hour:
        pytest.skip("the hour turned during the test")

    (finished,) = [
        s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
        if s.name == "alkqueue_jobs_finished_total" and s.labels == {"queue": "shop-noop"}
    ]
    assert finished == 40


def metric(body: bytes, name: str, **labels: str) -> float:
    (value,) = [
        s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == name and s.labels == labels
    ]
    return value


def test_retries_and_handler_durations_add_up_every_worker_process():
    hour = hour_of(timezone.now())
    reports = queue("shop-reports")
    reports.enqueue_many([{"fail_times": 1}] * 3)  # each fails once, then succeeds
    reports.enqueue_many([{"sleep": 0.15}] * 2)

    run_worker("--queue", "shop-reports", "--burst", "--processes", "2", "--concurrency", "2")
    body = client_for(make_user("ops", "view_queuestat")).get("/metrics/").content
    if hour_of(timezone.now()) != hour:
        pytest.skip("the hour turned during the test")

    assert metric(body, "alkqueue_jobs_retried_total", queue="shop-reports") == 3
    assert metric(body, "alkqueue_jobs_finished_total", queue="shop-reports") == 5
    # Eight handler calls: three failed attempts, their three retries, the two sleepers.
    count = metric(body, "alkqueue_handler_duration_seconds_count", queue="shop-reports")
    assert count == 8
    quick = metric(body, "alkqueue_handler_duration_seconds_bucket", queue="shop-reports",
                   le="0.1")  # fmt: skip
    assert quick <= 6
    total = metric(body, "alkqueue_handler_duration_seconds_sum", queue="shop-reports")
    assert total >= 0.3
