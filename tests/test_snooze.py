"""Snooze (docs/consumers.md, "Outcomes"): a handler that raises Snooze(delay) puts its job
back to pending at now + delay with the attempt refunded and its last error untouched, counted
as "snoozed" apart from failures, in the worker's summary and the QueueStat minutes."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from django_alkqueue import InvalidOption, Snooze, queue
from django_alkqueue.consumers import registry
from django_alkqueue.models import QueueMessage, QueueStat
from django_alkqueue.testing import Drained, drain
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def snoozing_consumer():
    import tests.snoozing_consumers

    importlib.reload(tests.snoozing_consumers)
    yield
    registry.unregister("snoozing")


def test_a_snoozed_job_is_pending_again_after_its_delay_with_the_attempt_refunded():
    job = queue("snoozing").enqueue({"snooze": 600})
    before = timezone.now()

    assert drain("snoozing") == Drained(snoozed=1)

    row = QueueMessage.objects.get(id=job.id)
    assert row.claim_token is None and row.attempts == 0
    assert before + timedelta(seconds=599) < row.run_at < timezone.now() + timedelta(seconds=601)


def test_a_snooze_keeps_the_last_error_of_an_earlier_attempt():
    job = queue("snoozing").enqueue({"fail_first": True, "snooze": 600})

    assert drain("snoozing") == Drained(retried=1, snoozed=1)

    row = QueueMessage.objects.get(id=job.id)
    assert row.attempts == 1  # the failed attempt counts, the snoozed one does not
    assert row.last_error.startswith("ConnectionError: first run fails")


def test_a_job_snoozed_for_no_time_runs_again_and_succeeds():
    job = queue("snoozing").enqueue({"snooze": 0})

    assert drain("snoozing") == Drained(snoozed=1, succeeded=1)
    assert not QueueMessage.objects.filter(id=job.id).exists()


def test_a_worker_refunds_snoozed_jobs_and_counts_them_apart_in_its_summary_and_the_minute_stats():
    queue("snoozing").enqueue_many([{"snooze": 600} for _ in range(3)])
    before = timezone.now()

    output = run_worker("--queue", "snoozing", "--burst",
                        env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.snoozing_consumers"})  # fmt: skip

    lines = output.splitlines()
    header = next(line.split() for line in lines if line.startswith("queue "))
    row = [line.split() for line in lines if line.startswith("snoozing ")][-1]  # the table's
    assert dict(zip(header, row, strict=True))["snoozed"] == "3", output
    # Summed over the minute rows: the drain may cross a minute's edge.
    stats = QueueStat.objects.filter(queue="snoozing")
    totals = stats.aggregate(snoozed=Sum("snoozed"), failed=Sum("failed"), finished=Sum("finished"))
    assert totals == {"snoozed": 3, "failed": 0, "finished": 0}
    # The refund, through the worker's own path: each job pending again, no attempt counted.
    rows = QueueMessage.objects.filter(queue="snoozing")
    assert [(r.attempts, r.claim_token, r.last_error) for r in rows] == [(0, None, None)] * 3
    assert all(r.run_at > before + timedelta(seconds=599) for r in rows)


def test_handle_snooze_refuses_a_claim_that_is_no_longer_held():
    snoozing = queue("snoozing")
    snoozing.enqueue({})
    (handle,) = snoozing.claim("w1")
    snoozing.cancel(handle.job.id)

    assert handle.snooze(60) is False


@pytest.mark.parametrize("delay", [-1, float("nan"), float("inf"), "soon"])
def test_a_bad_snooze_delay_raises_invalid_option(delay):
    with pytest.raises(InvalidOption):
        Snooze(delay)
