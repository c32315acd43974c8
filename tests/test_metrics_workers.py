"""The metrics' job counters after real worker processes ran the jobs: the QueueStat minutes
add up what every process did."""

from __future__ import annotations

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from django_alkqueue import queue
from django_alkqueue.metrics.collector import hour_of
from tests.admin_helpers import client_for, make_user
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)


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
