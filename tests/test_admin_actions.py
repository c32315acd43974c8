"""Each operator action does what it says, through `operations`, and leaves a LogEntry with
the count and the ids."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.messages import get_messages
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.admin import selection as admin_selection
from django_alkqueue.admin.compat import DETAIL_PAGE_ACTIONS
from django_alkqueue.models import Consumer, DeadLetter, QueueMessage
from django_alkqueue.worker.claimer import PausedQueues
from tests.admin_helpers import (
    CONSUMERS,
    DEAD,
    JOBS,
    VIEW_PERMS,
    client_for,
    dead_job_ids,
    dead_lettered,
    live_ids,
    make_user,
)
from tests.conftest import run_threads

needs_detail_page_actions = pytest.mark.skipif(
    not DETAIL_PAGE_ACTIONS, reason="actions on the detail page need Django 6.1"
)

pytestmark = pytest.mark.django_db


def post_action(client, url, action, ids, **extra):
    return client.post(url, {"action": action, "_selected_action": ids, "index": 0, **extra})


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def last_log() -> LogEntry:
    return LogEntry.objects.order_by("-id").first()


def requeue_counts() -> list[str]:
    """The count of every requeue run logged, in order: "requeue: N dead letters; ..."."""
    messages = LogEntry.objects.filter(change_message__startswith="requeue: ")
    return sorted(m.split()[1] for m in messages.values_list("change_message", flat=True))


# -- live jobs -----------------------------------------------------------------------------


def test_cancel_asks_for_confirmation_with_the_count(seeded, root):
    response = post_action(root, JOBS, "cancel", seeded.pending[:2])
    assert response.status_code == 200
    assert response.context["count"] == 2
    assert live_ids() >= set(seeded.pending)


def test_cancel_removes_the_jobs_and_logs_their_ids(seeded, root):
    ids = seeded.pending[:2] + seeded.claimed[:1]
    response = post_action(root, JOBS, "cancel", ids, confirm="yes")
    assert response.status_code == 302
    assert not live_ids() & set(ids)
    entry = last_log()
    assert entry.action_flag == DELETION
    assert entry.change_message == f"cancel: 3 jobs; ids {', '.join(map(str, sorted(ids)))}"
    assert "Cancelled 3 jobs." in messages_of(response)


@needs_detail_page_actions
def test_cancel_from_the_detail_page_returns_to_the_list(seeded, root):
    job = seeded.pending[0]
    response = root.post(
        f"{JOBS}{job}/change/",
        {"CHANGE_FORM-action": "cancel", "_selected_action": job, "confirm": "yes"},
    )
    assert response.status_code == 302 and response["Location"] == JOBS
    assert job not in live_ids()
    assert last_log().object_id == str(job)


def test_run_now_makes_scheduled_jobs_due_and_leaves_the_rest(seeded, root):
    scheduled, pending = seeded.scheduled[0], seeded.pending[0]
    before = QueueMessage.objects.get(pk=pending).run_at
    response = post_action(root, JOBS, "run_now", [scheduled, pending])
    assert response.status_code == 302
    assert QueueMessage.objects.get(pk=scheduled).run_at <= timezone.now()
    assert QueueMessage.objects.get(pk=pending).run_at == before
    assert queue("shop-emails").stats().scheduled == 0
    assert "1 scheduled job is due now." in messages_of(response)[0]
    assert last_log().change_message.startswith(f"run now: 2 jobs; ids {min(scheduled, pending)}")


def test_change_priority_asks_for_the_priority_then_sets_it(seeded, root):
    ids = seeded.pending[:2]
    form = post_action(root, JOBS, "change_priority", ids)
    assert form.status_code == 200 and "priority" in form.context["form"].fields
    response = post_action(root, JOBS, "change_priority", ids, confirm="yes", priority=7)
    assert response.status_code == 302
    assert set(QueueMessage.objects.filter(pk__in=ids).values_list("priority", flat=True)) == {7}
    assert last_log().change_message.startswith("change priority to 7: 2 jobs")


def test_change_priority_refuses_a_priority_out_of_range(seeded, root):
    response = post_action(
        root, JOBS, "change_priority", seeded.pending[:1], confirm="yes", priority=500
    )
    assert response.status_code == 200 and response.context["form"].errors
    assert QueueMessage.objects.get(pk=seeded.pending[0]).priority == 0


def test_run_now_on_all_matching_jobs_confirms_and_respects_the_filter(seeded, root):
    queue("shop-reports").enqueue({}, delay=600)
    url = f"{JOBS}?queue=shop-emails&state=scheduled"
    ask = root.post(
        url, {"action": "run_now", "select_across": "1", "_selected_action": "all", "index": 0}
    )
    assert ask.status_code == 200 and ask.context["count"] == 1
    root.post(
        url,
        {
            "action": "run_now",
            "select_across": "1",
            "_selected_action": "all",
            "index": 0,
            "confirm": "yes",
        },
    )
    assert queue("shop-emails").stats().scheduled == 0
    assert queue("shop-reports").stats().scheduled == 1


# -- dead letters --------------------------------------------------------------------------


def test_requeue_makes_the_dead_letter_live_again_with_the_same_id(seeded, root):
    job_id = seeded.dead[0]
    dead = DeadLetter.objects.get(job_id=job_id)
    response = post_action(root, DEAD, "requeue", [dead.pk])
    assert response.status_code == 302
    live = QueueMessage.objects.get(pk=job_id)
    assert (live.payload, live.attempts, live.max_attempts) == (dead.payload, 0, dead.max_attempts)
    assert job_id not in dead_job_ids()
    entry = last_log()
    assert (entry.action_flag, entry.object_id) == (CHANGE, str(dead.pk))
    assert entry.change_message == f"requeue: 1 dead letter; ids {dead.pk} -> jobs {job_id}"
    (message,) = messages_of(response)
    assert f'Requeued 1 dead letter as <a href="{JOBS}?id={job_id}">job {job_id}</a>.' in message


@needs_detail_page_actions
def test_requeue_from_the_detail_page_opens_the_live_job(seeded, root):
    dead = DeadLetter.objects.get(job_id=seeded.dead[0])
    response = root.post(
        f"{DEAD}{dead.pk}/change/", {"CHANGE_FORM-action": "requeue", "_selected_action": dead.pk}
    )
    assert response["Location"] == f"{JOBS}{dead.job_id}/change/"


def test_requeue_of_selected_dead_letters_needs_no_confirmation(seeded, root):
    pks = list(DeadLetter.objects.values_list("pk", flat=True))
    response = post_action(root, DEAD, "requeue", pks)
    assert "Requeued 2 dead letters as " in messages_of(response)[0]
    assert DeadLetter.objects.count() == 0
    assert live_ids() >= set(seeded.dead)


def test_requeue_all_matching_confirms_the_count_and_respects_the_filter(seeded, root):
    other = dead_lettered("shop-emails", {"x": 1}, "ValueError: bad")
    url = f"{DEAD}?queue=shop-webhooks"
    ask = root.post(
        url, {"action": "requeue", "select_across": "1", "_selected_action": "all", "index": 0}
    )
    assert ask.status_code == 200
    assert ask.context["count"] == 2
    assert "<strong>2</strong> dead letters" in ask.content.decode()
    assert DeadLetter.objects.count() == 3
    done = root.post(
        url,
        {
            "action": "requeue",
            "select_across": "1",
            "_selected_action": "all",
            "index": 0,
            "confirm": "yes",
        },
    )
    assert done.status_code == 302
    assert dead_job_ids() == {other}
    assert live_ids() >= set(seeded.dead)
    assert last_log().change_message.startswith("requeue: 2 dead letters")


def test_requeue_all_matching_stops_at_the_cap_and_says_so(seeded, root, monkeypatch):
    monkeypatch.setattr(admin_selection, "MAX_ACTION_ROWS", 1)
    response = root.post(
        DEAD,
        {
            "action": "requeue",
            "select_across": "1",
            "_selected_action": "all",
            "index": 0,
            "confirm": "yes",
        },
    )
    assert DeadLetter.objects.count() == 1
    assert "Run the action again for the rest." in messages_of(response)[0]


def test_requeueing_the_same_dead_letter_twice_gives_one_live_job(seeded, root):
    dead = DeadLetter.objects.get(job_id=seeded.dead[0])
    post_action(root, DEAD, "requeue", [dead.pk])
    again = post_action(root, DEAD, "requeue", [dead.pk])
    assert QueueMessage.objects.filter(pk=dead.job_id).count() == 1
    assert requeue_counts() == ["0", "1"]
    assert again.status_code == 302


def test_requeue_keeps_a_dead_letter_whose_unique_key_is_taken(root):
    q = queue("shop-emails")
    job = q.enqueue({"n": 1}, unique_key="k", priority=100)
    q.claim_one("w").fail("boom")
    holder = q.enqueue({"n": 2}, unique_key="k")
    dead = DeadLetter.objects.get(job_id=job.id)
    response = post_action(root, DEAD, "requeue", [dead.pk])
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert f"job {holder.id}" in messages_of(response)[0]


def test_delete_selected_deletes_dead_letters_after_our_confirmation(seeded, root):
    pks = sorted(DeadLetter.objects.values_list("pk", flat=True))
    ask = post_action(root, DEAD, "delete_selected", pks)
    assert ask.status_code == 200 and ask.context["count"] == 2
    assert "admin/django_alkqueue/confirm_action.html" in [t.name for t in ask.templates]
    post_action(root, DEAD, "delete_selected", pks, confirm="yes")
    assert DeadLetter.objects.count() == 0
    assert not live_ids() & set(seeded.dead)


def test_delete_selected_is_logged_once_with_the_count_and_the_ids(seeded, root):
    pks = sorted(DeadLetter.objects.values_list("pk", flat=True))
    before = LogEntry.objects.count()
    post_action(root, DEAD, "delete_selected", pks, confirm="yes")
    assert LogEntry.objects.count() == before + 1
    entry = last_log()
    assert entry.action_flag == DELETION
    assert entry.change_message == f"delete: 2 dead letters; ids {pks[0]}, {pks[1]}"


def test_delete_selected_needs_the_delete_permission(seeded):
    client = client_for(make_user("requeuer", *VIEW_PERMS, "requeue_deadletter"))
    data = {"_selected_action": [DeadLetter.objects.first().pk], "confirm": "yes"}
    response = client.post(DEAD, {"action": "delete_selected", "index": 0, **data})
    assert response.status_code == 403
    assert DeadLetter.objects.count() == 2


def test_the_dead_letter_list_offers_requeue_and_delete(seeded, root):
    choices = dict(root.get(DEAD).context["action_form"].fields["action"].choices)
    assert set(choices) - {""} == {"requeue", "delete_selected"}
    assert choices["delete_selected"] == "Delete selected dead letters"


def test_the_dead_letter_list_filters_by_queue_reason_and_date(seeded, root):
    old = dead_lettered("shop-reports", {}, "KeyError: 'x'")
    DeadLetter.objects.filter(job_id=old).update(died_at=timezone.now() - timedelta(days=30))
    rows = root.get(DEAD, {"queue": "shop-webhooks"}).context["cl"].result_list
    assert {d.job_id for d in rows} == set(seeded.dead)
    assert root.get(DEAD, {"reason": "expired"}).context["cl"].result_list.count() == 0
    week = (timezone.now() - timedelta(days=7)).isoformat()
    recent = root.get(DEAD, {"died_at__gte": week}).context["cl"].result_list
    assert {d.job_id for d in recent} == set(seeded.dead)
    assert "ConnectionError: refused 0" in root.get(DEAD).content.decode()


# -- consumers -----------------------------------------------------------------------------


def test_pause_and_resume_set_the_flag_workers_read(seeded, root):
    emails = Consumer.objects.get(queue="shop-emails")
    post_action(root, CONSUMERS, "pause", [emails.pk])
    assert PausedQueues("default", ["shop-emails", "shop-webhooks"], 0).current() == {
        "shop-emails",
        "shop-webhooks",
    }
    assert last_log().change_message == f"pause: 1 consumer; ids {emails.pk}. queues shop-emails"
    post_action(root, CONSUMERS, "resume", [emails.pk])
    assert PausedQueues("default", ["shop-emails", "shop-webhooks"], 0).current() == {
        "shop-webhooks"
    }


def test_pause_needs_the_pause_permission(seeded):
    client = client_for(make_user("viewer", *VIEW_PERMS))
    emails = Consumer.objects.get(queue="shop-emails")
    assert post_action(client, CONSUMERS, "pause", [emails.pk]).status_code == 403
    assert not Consumer.objects.get(pk=emails.pk).paused


def test_resume_consumer_alone_allows_resume_but_not_pause(seeded):
    client = client_for(make_user("resumer", *VIEW_PERMS, "resume_consumer"))
    webhooks = Consumer.objects.get(queue="shop-webhooks")  # seeded paused
    emails = Consumer.objects.get(queue="shop-emails")
    assert post_action(client, CONSUMERS, "resume", [webhooks.pk]).status_code == 302
    assert not Consumer.objects.get(pk=webhooks.pk).paused
    assert post_action(client, CONSUMERS, "pause", [emails.pk]).status_code == 403
    assert not Consumer.objects.get(pk=emails.pk).paused


def test_pause_consumer_allows_resume_too(seeded):
    client = client_for(make_user("pauser", *VIEW_PERMS, "pause_consumer"))
    webhooks = Consumer.objects.get(queue="shop-webhooks")
    assert post_action(client, CONSUMERS, "resume", [webhooks.pk]).status_code == 302
    assert not Consumer.objects.get(pk=webhooks.pk).paused
    assert last_log().change_message.startswith("resume: 1 consumer")


# -- concurrency ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_operators_requeueing_one_dead_letter_at_once_make_one_live_job():
    job_id = dead_lettered("shop-webhooks", {"n": 1}, "boom")
    dead = DeadLetter.objects.get(job_id=job_id)
    clients = [client_for(make_user(f"op{i}", superuser=True)) for i in range(2)]
    statuses = []

    def requeue(i: int) -> None:
        statuses.append(post_action(clients[i], DEAD, "requeue", [dead.pk]).status_code)

    run_threads(2, requeue)
    assert statuses == [302, 302]
    assert QueueMessage.objects.filter(pk=job_id).count() == 1
    assert not DeadLetter.objects.exists()
    assert requeue_counts() == ["0", "1"]  # the second operator's run is logged, empty


def test_djangos_select_all_applies_the_action_to_every_matching_row(seeded, root):
    on_page = list(DeadLetter.objects.values_list("pk", flat=True)[:1])
    data = {
        "action": "requeue",
        "select_across": "1",
        "_selected_action": on_page,
        "index": 0,
        "confirm": "yes",
    }
    root.post(f"{DEAD}?queue=shop-webhooks", data)
    assert DeadLetter.objects.count() == 0
