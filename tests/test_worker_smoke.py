"""A first end-to-end look at the worker command (the full worker suite is in test_worker_*)."""

from __future__ import annotations

import pytest

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from testproject.shop.models import HandlerRun
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_burst_worker_drains_its_queue_and_exits():
    jobs = queue("shop-emails").enqueue_many([{"i": i} for i in range(20)])
    output = run_worker("--queue", "shop-emails", "--burst", "--concurrency", "2")
    assert QueueMessage.objects.count() == 0
    assert sorted(HandlerRun.objects.values_list("job_id", flat=True)) == sorted(j.id for j in jobs)
    assert "shop-emails" in output
