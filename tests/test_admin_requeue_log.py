"""A requeue is logged on the dead letters it ran from, with the count, their ids and the jobs
they became; a live job's page reads that entry back to say which dead letter it came from."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.test import RequestFactory

from django_alkqueue import queue
from django_alkqueue.admin.requeue_log import RequeueRun, record_requeue, requeued_from
from django_alkqueue.models import DeadLetter
from tests.admin_helpers import DEAD, JOBS, dead_lettered

pytestmark = pytest.mark.django_db


def requeue(client, *dead_ids: int):
    data = {"action": "requeue", "_selected_action": list(dead_ids), "index": 0}
    return client.post(DEAD, data)


def dead_letters_by_died_at() -> list[tuple[int, int]]:
    """(dead letter id, job id), in the order the action works through them."""
    return list(DeadLetter.objects.order_by("died_at").values_list("pk", "job_id"))


def last_log() -> LogEntry:
    return LogEntry.objects.order_by("-id").first()


def test_requeue_is_logged_on_the_dead_letters_with_their_ids_and_the_jobs_they_became(
    seeded, root
):
    (d1, j1), (d2, j2) = dead_letters_by_died_at()
    requeue(root, d1, d2)
    entry = last_log()
    assert entry.content_type.model_class() is DeadLetter
    assert entry.action_flag == CHANGE
    assert entry.change_message == f"requeue: 2 dead letters; ids {d1}, {d2} -> jobs {j1}, {j2}"
    assert entry.object_repr == "requeue: 2 dead letters"


def test_a_requeue_of_one_dead_letter_names_it_as_the_logged_object(seeded, root):
    dead, job = dead_letters_by_died_at()[0]
    requeue(root, dead)
    entry = last_log()
    assert entry.object_id == str(dead)
    assert entry.change_message == f"requeue: 1 dead letter; ids {dead} -> jobs {job}"


def test_a_requeue_that_requeues_nothing_is_still_logged_with_a_count_of_0(seeded, root):
    dead, _ = dead_letters_by_died_at()[0]
    requeue(root, dead)
    requeue(root, dead)  # gone: the first run made it a live job
    entry = last_log()
    assert entry.content_type.model_class() is DeadLetter
    assert entry.change_message == (
        f"requeue: 0 dead letters; ids {dead}. already gone: ids {dead}"
    )


def test_a_dead_letter_kept_for_its_unique_key_is_logged_with_the_job_holding_it(root):
    q = queue("shop-emails")
    job = q.enqueue({"n": 1}, unique_key="k", priority=100)
    q.claim_one("w").fail("boom")
    holder = q.enqueue({"n": 2}, unique_key="k")
    dead = DeadLetter.objects.get(job_id=job.id)
    requeue(root, dead.pk)
    assert last_log().change_message == (
        f"requeue: 0 dead letters; ids {dead.pk}. "
        f"kept, a live job holds the unique key: ids {dead.pk} (job {holder.id})"
    )


def test_the_job_page_says_which_dead_letter_it_was_requeued_from(seeded, root):
    dead, job = dead_letters_by_died_at()[0]
    requeue(root, dead)
    page = root.get(f"{JOBS}{job}/change/").content.decode()
    assert f"dead letter #{dead} on " in page
    assert "by root" in page


def test_a_job_never_requeued_has_no_origin(seeded, root):
    assert requeued_from(seeded.pending[0]) is None
    assert root.get(f"{JOBS}{seeded.pending[0]}/change/").status_code == 200


def test_each_job_requeued_in_one_run_finds_its_own_dead_letter(seeded, root):
    rows = dead_letters_by_died_at()
    requeue(root, *(dead for dead, _ in rows))
    for dead, job in rows:
        assert requeued_from(job).dead_letter_id == dead


def test_the_origin_follows_the_latest_requeue(root):
    job_id = dead_lettered("shop-webhooks", {"n": 1}, "boom")
    first = DeadLetter.objects.get(job_id=job_id).pk
    requeue(root, first)
    queue("shop-webhooks").claim_one("w").fail("boom again")
    second = DeadLetter.objects.get(job_id=job_id).pk
    requeue(root, second)
    assert second != first
    assert requeued_from(job_id).dead_letter_id == second


def test_a_job_id_that_only_ends_another_job_id_is_not_its_origin(root_user):
    request = RequestFactory().post(DEAD)
    request.user = root_user
    record_requeue(request, RequeueRun([7], [(7, 114)], [], []))
    assert requeued_from(14) is None
    assert requeued_from(11) is None
    assert requeued_from(114).dead_letter_id == 7


def test_the_origin_is_read_in_one_query(seeded, root, django_assert_num_queries):
    dead, job = dead_letters_by_died_at()[0]
    requeue(root, dead)
    with django_assert_num_queries(1):
        origin = requeued_from(job)
    assert origin.dead_letter_id == dead
