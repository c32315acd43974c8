"""History (docs/running-jobs.md, "History and recorded output"): a queue with
`keep` writes each finished job, with its handler's return value, to the history in the
transaction of its ack; get_job finds it there; the leader's sweep deletes it after `keep`."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import InvalidOption, consumer, operations, queue
from django_alkqueue.conf import get_settings
from django_alkqueue.consumers import registry
from django_alkqueue.models import FinishedJob, QueueMessage
from django_alkqueue.testing import Drained, drain
from django_alkqueue.worker.history_sweeper import HistoryService
from tests.keeping_consumers import ODD_OUTPUTS
from tests.workers import run_worker

pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = ("keeping", "keeping-atomic", "keeping-batch", "not-keeping")


@pytest.fixture(autouse=True)
def keeping_consumers():
    import tests.keeping_consumers

    importlib.reload(tests.keeping_consumers)
    yield
    for name in QUEUES:
        registry.unregister(name)


def kept(job_id: int) -> FinishedJob:
    return FinishedJob.objects.get(job_id=job_id)


def test_a_job_retried_then_acked_by_a_worker_is_kept_once_with_its_attempts_counted():
    job = queue("keeping").enqueue({"fail_first": 2, "value": {"n": 1}})

    run_worker("--queue", "keeping", "--burst",
               env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.keeping_consumers"})  # fmt: skip

    assert FinishedJob.objects.filter(job_id=job.id).count() == 1
    row = kept(job.id)
    assert (row.queue, row.outcome, row.attempts, row.output) == ("keeping", "succeeded", 3,
                                                                  {"n": 1})  # fmt: skip
    assert row.payload == {"fail_first": 2, "value": {"n": 1}}
    assert row.last_error.startswith("ConnectionError: attempt 2 fails")
    assert row.worker_id and row.duration is not None and row.duration >= 0
    assert row.enqueued_at <= row.started_at <= row.finished_at
    assert timedelta(days=2) - timedelta(minutes=5) < row.delete_after - row.finished_at
    assert not QueueMessage.objects.filter(id=job.id).exists()


def test_the_handlers_return_value_is_recorded_as_json():
    job = queue("keeping").enqueue({"value": ["a", 1, 2.5, None, {"ü": True}]})

    assert drain("keeping") == Drained(succeeded=1)

    row = kept(job.id)
    assert row.output == ["a", 1, 2.5, None, {"ü": True}] and row.output_error is None


def test_a_handler_returning_none_records_no_output():
    job = queue("keeping").enqueue({})

    drain("keeping")

    assert (kept(job.id).output, kept(job.id).output_error) == (None, None)


def test_an_output_over_max_output_bytes_is_a_note_and_the_job_still_succeeds():
    job = queue("keeping").enqueue({"output": "big"})

    assert drain("keeping") == Drained(succeeded=1)

    row = kept(job.id)
    assert row.output is None and row.outcome == "succeeded"
    assert row.output_error == ("output not recorded: 40002 bytes, more than "
                                "ALKQUEUE['MAX_OUTPUT_BYTES'] (32768)")  # fmt: skip


def test_max_output_bytes_is_a_setting():
    job = queue("keeping").enqueue({"value": "x" * 100})

    with override_settings(ALKQUEUE={"MAX_OUTPUT_BYTES": 50}):
        drain("keeping")

    assert kept(job.id).output_error.startswith("output not recorded: 102 bytes")


def test_an_output_that_is_not_json_is_a_note_and_the_job_still_succeeds():
    job = queue("keeping").enqueue({"output": "object"})

    assert drain("keeping") == Drained(succeeded=1)

    row = kept(job.id)
    assert row.output is None
    assert row.output_error.startswith("output not recorded: not JSON (TypeError: ")


@pytest.mark.parametrize("output", sorted(ODD_OUTPUTS))
def test_an_output_the_history_cannot_store_is_a_note_and_the_job_still_succeeds(output):
    """A lone surrogate (a file name read from disk), a number past the int-to-str limit,
    NaN, a cycle, a mapping that raises: the ack goes through, the history row says why."""
    job = queue("keeping").enqueue({"output": output})

    assert drain("keeping") == Drained(succeeded=1)

    row = kept(job.id)
    assert (row.outcome, row.attempts, row.output) == ("succeeded", 1, None)
    assert row.output_error.startswith("output not recorded: ")
    assert not QueueMessage.objects.filter(id=job.id).exists()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_worker_acks_a_job_whose_output_has_an_unpaired_surrogate_and_notes_it(pool):
    job = queue("keeping").enqueue({"output": "surrogate"})

    run_worker("--queue", "keeping", "--burst", "--pool", pool,
               env={"ALKQUEUE_EXTRA_CONSUMERS": "tests.keeping_consumers"})  # fmt: skip

    row = kept(job.id)
    assert (row.outcome, row.attempts, row.output) == ("succeeded", 1, None)
    assert row.output_error == "output not recorded: a str with an unpaired surrogate"
    assert not QueueMessage.objects.filter(id=job.id).exists()


def test_an_output_with_a_nul_character_is_recorded_as_it_was():
    """JSON writes NUL as \\u0000 and the output column is text, not jsonb: PostgreSQL takes
    it, and the value reads back whole."""
    job = queue("keeping").enqueue({"value": {"s": "a\x00b"}})

    assert drain("keeping") == Drained(succeeded=1)

    assert kept(job.id).output == {"s": "a\x00b"}


def test_a_queue_without_keep_writes_no_history():
    queue("not-keeping").enqueue({})

    assert drain("not-keeping") == Drained(succeeded=1)

    assert not FinishedJob.objects.exists()


def test_an_atomic_consumer_keeps_its_output():
    job = queue("keeping-atomic").enqueue({})

    assert drain("keeping-atomic") == Drained(succeeded=1)

    assert kept(job.id).output == {"done": job.id}


def test_a_batch_consumer_keeps_each_job_of_its_call_without_output():
    jobs = queue("keeping-batch").enqueue_many([{"n": n} for n in range(3)])

    assert drain("keeping-batch") == Drained(succeeded=3)

    rows = FinishedJob.objects.filter(job_id__in=[j.id for j in jobs])
    assert sorted((r.job_id, r.output, r.outcome) for r in rows) == [
        (j.id, None, "succeeded") for j in jobs
    ]


def test_a_rolled_back_ack_writes_no_history():
    keeping = queue("keeping")
    job = keeping.enqueue({})
    (handle,) = keeping.claim("w1")

    with pytest.raises(ZeroDivisionError), transaction.atomic():
        assert handle.ack() is True
        1 / 0  # noqa: B018

    assert not FinishedJob.objects.exists()
    assert QueueMessage.objects.filter(id=job.id).exists()


def test_a_refused_ack_writes_no_history():
    keeping = queue("keeping")
    keeping.enqueue({})
    (handle,) = keeping.claim("w1")
    keeping.cancel(handle.job.id)

    assert handle.ack() is False
    assert not FinishedJob.objects.exists()


def test_an_ack_through_the_queue_api_keeps_the_job_without_output():
    keeping = queue("keeping")
    job = keeping.enqueue({"n": 1}, concurrency_key="k1")
    (handle,) = keeping.claim("w1")

    assert handle.ack() is True

    row = kept(job.id)
    assert (row.worker_id, row.concurrency_key) == ("w1", "k1")
    assert (row.output, row.duration) == (None, None)


def test_ack_batch_keeps_the_jobs_it_acks_without_output():
    keeping = queue("keeping")
    jobs = keeping.enqueue_many([{"n": n} for n in range(3)])
    claimed = keeping.claim("w1", 2)

    assert keeping.ack_batch([h.job.id for h in claimed] + [jobs[2].id]) == 2

    rows = FinishedJob.objects.order_by("job_id")
    assert [(r.job_id, r.worker_id, r.output) for r in rows] == [
        (h.job.id, "w1", None) for h in claimed
    ]
    assert QueueMessage.objects.filter(id=jobs[2].id).exists()  # unclaimed: not acked


def test_ack_batch_of_a_queue_without_keep_writes_no_history():
    other = queue("not-keeping")
    other.enqueue({})
    (handle,) = other.claim("w1")

    assert other.ack_batch([handle.job.id]) == 1
    assert not FinishedJob.objects.exists()


def test_one_ack_keeps_the_jobs_of_keeping_queues_only():
    from django_alkqueue.queues import ack_handles

    history_job = queue("keeping").enqueue({})
    other = queue("not-keeping").enqueue({})
    handles = [*queue("keeping").claim("w1"), *queue("not-keeping").claim("w1")]

    assert len(ack_handles(handles, "default")) == 2

    assert list(FinishedJob.objects.values_list("job_id", flat=True)) == [history_job.id]
    assert not QueueMessage.objects.filter(id__in=[history_job.id, other.id]).exists()


def test_get_job_finds_a_kept_job_as_succeeded():
    job = queue("keeping").enqueue({"value": 7})
    drain("keeping")

    found = queue("keeping").get_job(job.id)

    assert found is not None and found.state == "succeeded"
    assert (found.id, found.payload, found.output, found.attempts) == (job.id, {"value": 7}, 7, 1)
    assert found.finished_at is not None and found.duration is not None
    assert queue("other").get_job(job.id) is None


def test_get_job_reads_the_live_row_before_the_history():
    job = queue("keeping").enqueue({})

    assert queue("keeping").get_job(job.id).state == "pending"


def test_a_job_cancelled_while_running_is_kept_as_cancelled():
    keeping = queue("keeping")
    keeping.enqueue({"n": 2})
    (handle,) = keeping.claim("w1")
    assert keeping.cancel(handle.job.id)

    assert operations.keep_cancelled("default", handle.job, timezone.now()) is True

    found = keeping.get_job(handle.job.id)
    assert found.state == "cancelled" and found.claimed_by == "w1"


def test_keep_cancelled_writes_nothing_for_a_queue_without_keep():
    other = queue("not-keeping")
    other.enqueue({})
    (handle,) = other.claim("w1")

    assert operations.keep_cancelled("default", handle.job, timezone.now()) is False
    assert not FinishedJob.objects.exists()


def test_the_sweep_deletes_kept_jobs_past_their_keep_and_no_others():
    jobs = queue("keeping").enqueue_many([{} for _ in range(5)])
    drain("keeping")
    ids = [j.id for j in jobs]
    sweeper = HistoryService("default", batch=2)

    sweeper.run_once(timezone.now() + timedelta(days=1))
    assert FinishedJob.objects.filter(job_id__in=ids).count() == 5
    sweeper.run_once(timezone.now() + timedelta(days=2, minutes=1))
    assert not FinishedJob.objects.filter(job_id__in=ids).exists()


@override_settings(ALKQUEUE={"QUEUES": {"settings-keep": {"keep": timedelta(hours=1)}}})
def test_queues_setting_keep_keeps_a_queue_without_consumer():
    q = queue("settings-keep")
    job = q.enqueue({})
    (handle,) = q.claim("w1")

    handle.ack()

    row = kept(job.id)
    assert row.delete_after - row.finished_at == timedelta(hours=1)


def test_keep_must_be_a_positive_duration():
    with pytest.raises(InvalidOption, match="keep"):
        consumer("bad-keep", keep=0)
    with pytest.raises(InvalidOption, match="keep"):
        consumer("bad-keep", keep="1 day")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -1, "1d", True])
def test_a_bad_keep_in_the_queues_setting_is_refused(value):
    bad = override_settings(ALKQUEUE={"QUEUES": {"q": {"keep": value}}})
    with bad, pytest.raises(ImproperlyConfigured, match=r"\['keep'\]"):
        get_settings()


def test_max_output_bytes_must_be_a_positive_int():
    bad = override_settings(ALKQUEUE={"MAX_OUTPUT_BYTES": 0})
    with bad, pytest.raises(ImproperlyConfigured, match="MAX_OUTPUT_BYTES"):
        get_settings()


@override_settings(ALKQUEUE={"QUEUES": {"tasks-high": {"keep": 3600}}})
def test_a_task_queue_with_keep_records_the_tasks_return_value():
    from testproject.shop import tasks

    enqueued = tasks.add.using(queue_name="tasks-high").enqueue(1, 2)

    assert drain("tasks-high") == Drained(succeeded=1)

    row = kept(int(enqueued.id))
    assert (row.output, row.outcome) == (3, "succeeded")
    assert tasks.add.get_result(enqueued.id).return_value == 3  # the result row is unchanged


def test_the_old_name_history_finish_class_still_works_with_a_deprecation_warning():
    from django_alkqueue import history

    with pytest.warns(DeprecationWarning, match="history.Finish is deprecated"):
        assert history.Finish is history.HistoryEntry


def test_the_old_name_history_finish_function_still_works_with_a_deprecation_warning():
    from django_alkqueue import history

    with pytest.warns(DeprecationWarning, match="history.finish is deprecated"):
        assert history.finish is history.entry_for
