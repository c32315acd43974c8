"""Queue-level calls take job ids: a bad id is refused before any query, so it cannot fail a
statement (and on PostgreSQL abort the caller's transaction)."""

from __future__ import annotations

import pytest
from django.db import transaction

from django_alkqueue import InvalidOption
from django_alkqueue.models import QueueMessage

pytestmark = pytest.mark.django_db

BAD_IDS = [2**63, 10**20, 0, -1, "abc", "7", None, 1.0, True]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_get_job_cancel_and_requeue_refuse_a_bad_id(q, bad):
    for call in (q.get_job, q.cancel, q.requeue):
        with pytest.raises(InvalidOption, match="job id"):
            call(bad)


@pytest.mark.parametrize("bad", BAD_IDS)
def test_ack_batch_refuses_a_bad_id_among_good_ones(q, bad):
    job = q.enqueue({})
    q.claim_one("w")
    with pytest.raises(InvalidOption, match="job id"):
        q.ack_batch([job.id, bad])
    assert q.get_job(job.id).state == "claimed"


@pytest.mark.parametrize("bad", ["12", b"12", 12, None])
def test_ack_batch_refuses_what_is_not_a_list_of_ids(q, bad):
    with pytest.raises(InvalidOption, match="iterable of job ids"):
        q.ack_batch(bad)


@pytest.mark.django_db(transaction=True)
def test_a_refused_id_leaves_the_callers_transaction_usable(q):
    with transaction.atomic():
        kept = q.enqueue({"n": 1})
        with pytest.raises(InvalidOption):
            q.get_job(2**63)
        with pytest.raises(InvalidOption):
            q.ack_batch([10**20])
        q.enqueue({"n": 2})
    assert QueueMessage.objects.filter(queue=q.name).count() == 2
    assert q.get_job(kept.id) is not None


def test_the_largest_bigint_is_a_valid_id_that_matches_nothing(q):
    assert q.get_job(2**63 - 1) is None
    assert q.cancel(2**63 - 1) is False
    assert q.requeue(2**63 - 1) is None
    assert q.ack_batch([2**63 - 1]) == 0
