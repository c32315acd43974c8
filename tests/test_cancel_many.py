"""Cancels in numbers (operations.cancel_many): the admin's action and `alk_jobs cancel` cancel
a slice of jobs in a few statements, not a round trip per job, with what each cancel does (a
cancel request for a claimed job, the workflows told)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_alkqueue import operations
from django_alkqueue.models import CancelRequest, QueueMessage
from django_alkqueue.sql import dialect_for
from tests.admin_helpers import JOBS, client_for, make_user

pytestmark = pytest.mark.django_db

JOBS_CANCELLED = 1_000


def statements_bound(n: int) -> int:
    """A select and a delete per slice of ids, and a few more for the transaction and the
    workflows' check."""
    slices = -(-n // dialect_for(connection).ids_per_statement)
    return 2 * slices + 8


def test_cancelling_many_jobs_takes_a_few_statements_not_one_per_job(make_queue, clock):
    ids = [job.id for job in make_queue("emails").enqueue_many([{}] * JOBS_CANCELLED)]

    with CaptureQueriesContext(connection) as statements:
        cancelled = operations.cancel_many("default", ids, clock.now)

    assert sorted(cancelled) == ids and not QueueMessage.objects.exists()
    assert len(statements) <= statements_bound(JOBS_CANCELLED)


def test_the_admins_cancel_action_over_many_jobs_takes_a_few_statements(make_queue):
    ids = [job.id for job in make_queue("emails").enqueue_many([{}] * 300)]
    client = client_for(make_user("root", superuser=True))
    client.get(JOBS)  # sessions, content types and permissions read once

    with CaptureQueriesContext(connection) as statements:
        response = client.post(JOBS, {"action": "cancel", "_selected_action": ids, "index": 0,
                                      "confirm": "yes"})  # fmt: skip

    assert response.status_code == 302 and not QueueMessage.objects.exists()
    assert len(statements) <= statements_bound(300) + 15  # the request's own reads and writes


def test_cancel_many_returns_only_the_jobs_still_live(make_queue, clock):
    q = make_queue("emails")
    kept, gone = q.enqueue({}), q.enqueue({})
    q.cancel(gone.id)
    assert operations.cancel_many("default", [kept.id, gone.id], clock.now) == [kept.id]


def test_cancel_many_leaves_a_cancel_request_for_each_claimed_job(make_queue, clock):
    q = make_queue("emails")
    q.enqueue_many([{}] * 3)
    claimed = [handle.job.id for handle in q.claim("w-3", 2)]
    every = list(QueueMessage.objects.values_list("id", flat=True))

    operations.cancel_many("default", every, clock.now)

    requests = CancelRequest.objects.order_by("job_id").values_list("job_id", "worker_id")
    assert list(requests) == [(job_id, "w-3") for job_id in sorted(claimed)]


def test_cancel_many_within_a_queue_leaves_other_queues_jobs(make_queue, clock):
    other = make_queue("reports").enqueue({})
    assert operations.cancel_many("default", [other.id], clock.now, queue="emails") == []
    assert QueueMessage.objects.filter(id=other.id).exists()
