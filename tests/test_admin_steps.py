"""Durable steps in the admin (docs/admin.md, "Steps"): a job's page lists the steps its
handler recorded, their values shown as the payload is (masked on a sensitive queue without
view_payload); a dead letter's page offers Requeue from step…, which requeues the job and
deletes the chosen step and every step recorded after it, audited as a requeue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import InvalidOption, job_actions, operations, queue
from django_alkqueue.audit import Actor
from django_alkqueue.models import DeadLetter, FinishedJob, JobStep, QueueMessage
from django_alkqueue.privacy import MASK
from tests.admin_helpers import ADMIN, DEAD, JOBS, VIEW_PERMS, client_for, dead_lettered, make_user

pytestmark = pytest.mark.django_db

SECRET = "4111 1111 1111 1111"
SENSITIVE = override_settings(ALKQUEUE={"QUEUES": {"pay": {"sensitive": True}}})
AT = datetime(2031, 3, 10, 12, 0, tzinfo=UTC)


def add_steps(job_id: int, *names: str, value: object = None, at: datetime = AT) -> None:
    """Steps recorded one second apart, in the order named."""
    for i, name in enumerate(names):
        JobStep.objects.create(
            job_id=job_id, name=name, value={"step": name} if value is None else value,
            recorded_at=at + timedelta(seconds=i), attempt=i + 1, duration=0.25,
        )  # fmt: skip


def step_names(job_id: int) -> list[str]:
    rows = JobStep.objects.filter(job_id=job_id).order_by("recorded_at", "id")
    return list(rows.values_list("name", flat=True))


def dead_letter(name: str = "shop", payload: object = None) -> DeadLetter:
    job_id = dead_lettered(name, {"n": 1} if payload is None else payload, "Boom")
    return DeadLetter.objects.get(job_id=job_id)


def dead_page(dead: DeadLetter) -> str:
    return f"{DEAD}{dead.pk}/change/"


def requeue_page(dead: DeadLetter) -> str:
    return f"{DEAD}{dead.pk}/requeue-from-step/"


@pytest.fixture
def root():
    return client_for(make_user("root", superuser=True))


@pytest.fixture
def viewer():
    return client_for(make_user("viewer", *VIEW_PERMS))


@pytest.fixture
def requeuer():
    return client_for(make_user("requeuer", *VIEW_PERMS, "requeue_deadletter"))


# -- the Steps section ---------------------------------------------------------------------


def test_a_dead_letters_page_lists_its_steps_in_the_order_recorded(root):
    dead = dead_letter()
    add_steps(dead.job_id, "charge", "receipt", "ship")

    html = root.get(dead_page(dead)).content.decode()

    assert 'id="alk-steps"' in html
    assert html.index("<code>charge</code>") < html.index("<code>receipt</code>") < html.index(
        "<code>ship</code>")  # fmt: skip
    assert "&quot;step&quot;: &quot;receipt&quot;" in html
    assert "250.0 ms" in html


def test_a_live_jobs_page_lists_its_steps():
    client = client_for(make_user("root", superuser=True))
    job = queue("shop").enqueue({"n": 1})
    add_steps(job.id, "first")

    html = client.get(f"{JOBS}{job.id}/change/").content.decode()

    assert 'id="alk-steps"' in html and "<code>first</code>" in html
    assert "alk-requeue-from-step" not in html  # a live job is not requeued


def test_a_kept_jobs_page_lists_its_steps(root):
    kept = FinishedJob.objects.create(
        job_id=77, queue="kept", payload={}, attempts=1, max_attempts=3, backoff_base=5,
        lease=30, enqueued_at=AT, started_at=AT, finished_at=AT, duration=1.0,
        worker_id="host:1", outcome="succeeded", delete_after=AT + timedelta(days=1),
    )  # fmt: skip
    add_steps(kept.job_id, "first")

    html = root.get(f"{ADMIN}/finishedjob/{kept.job_id}/change/").content.decode()

    assert 'id="alk-steps"' in html and "<code>first</code>" in html


def test_a_job_without_steps_has_no_steps_section(root):
    html = root.get(dead_page(dead_letter())).content.decode()

    assert 'id="alk-steps"' not in html


@SENSITIVE
def test_step_values_of_a_sensitive_queue_are_masked_for_a_user_without_view_payload(viewer):
    dead = dead_letter("pay", {"card": SECRET})
    add_steps(dead.job_id, "charge", value={"card": SECRET, "amount": 12})

    html = viewer.get(dead_page(dead)).content.decode()

    assert SECRET not in html
    assert f"&quot;card&quot;: &quot;{MASK}&quot;" in html
    assert f"&quot;amount&quot;: &quot;{MASK}&quot;" in html


@SENSITIVE
def test_step_values_of_a_sensitive_queue_are_shown_whole_with_view_payload():
    client = client_for(make_user("payload", *VIEW_PERMS, "view_payload"))
    dead = dead_letter("pay", {"card": SECRET})
    add_steps(dead.job_id, "charge", value={"card": SECRET})

    assert SECRET in client.get(dead_page(dead)).content.decode()


def test_the_section_lists_the_last_steps_recorded_when_there_are_many(root):
    dead = dead_letter()
    add_steps(dead.job_id, *[f"part-{i}" for i in range(105)])

    html = root.get(dead_page(dead)).content.decode()

    assert 'id="alk-steps-more"' in html
    assert "<code>part-104</code>" in html and "<code>part-4</code>" not in html


# -- Requeue from step… --------------------------------------------------------------------


def test_the_requeue_from_step_link_is_offered_only_to_users_who_may_requeue(viewer, requeuer):
    dead = dead_letter()
    add_steps(dead.job_id, "s1", "s2")

    assert "alk-requeue-from-step" not in viewer.get(dead_page(dead)).content.decode()
    assert "alk-requeue-from-step" in requeuer.get(dead_page(dead)).content.decode()


def test_requeue_from_step_requeues_the_job_and_deletes_that_step_and_those_after(requeuer):
    dead = dead_letter()
    add_steps(dead.job_id, "s1", "s2", "s3", "s4")

    response = requeuer.post(requeue_page(dead), {"step": "s3"})

    assert response.status_code == 302
    assert response["Location"] == f"{JOBS}{dead.job_id}/change/"
    assert QueueMessage.objects.filter(id=dead.job_id, attempts=0).exists()
    assert not DeadLetter.objects.filter(pk=dead.pk).exists()
    assert step_names(dead.job_id) == ["s1", "s2"]


def test_the_requeue_from_step_page_lists_the_steps_and_preselects_the_one_asked_for(requeuer):
    dead = dead_letter()
    add_steps(dead.job_id, "s1", "s2")

    response = requeuer.get(requeue_page(dead) + "?step=s2")

    assert response.status_code == 200
    assert response.context["form"]["step"].value() == "s2"
    assert step_names(dead.job_id) == ["s1", "s2"]  # a GET changes nothing
    assert DeadLetter.objects.filter(pk=dead.pk).exists()


def test_requeue_from_step_is_audited_as_a_requeue_and_the_job_says_where_it_came_from(
    requeuer,
):
    dead = dead_letter()
    add_steps(dead.job_id, "s1", "s2", "s3")

    requeuer.post(requeue_page(dead), {"step": "s2"})

    entry = LogEntry.objects.order_by("-id").first()
    assert entry.change_message == (
        f"requeue: 1 dead letter; ids {dead.pk} -> jobs {dead.job_id}. from step 's2' of job "
        f"{dead.job_id}: steps deleted 's2', 's3'"
    )
    page = requeuer.get(f"{JOBS}{dead.job_id}/change/").content.decode()
    assert f"dead letter #{dead.pk} on" in page


def test_a_post_without_the_requeue_permission_is_403_and_changes_nothing(viewer):
    dead = dead_letter()
    add_steps(dead.job_id, "s1", "s2")

    assert viewer.get(requeue_page(dead)).status_code == 403
    assert viewer.post(requeue_page(dead), {"step": "s1"}).status_code == 403

    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert step_names(dead.job_id) == ["s1", "s2"]
    assert not LogEntry.objects.exists()


def test_a_step_the_job_did_not_record_is_refused_on_the_form_and_changes_nothing(requeuer):
    dead = dead_letter()
    add_steps(dead.job_id, "s1")

    response = requeuer.post(requeue_page(dead), {"step": "nope"})

    assert response.status_code == 200
    assert response.context["form"].errors
    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert step_names(dead.job_id) == ["s1"]


def test_steps_recorded_at_the_same_time_are_ordered_by_id():
    dead = dead_letter()
    for name in ("b", "a", "c"):
        JobStep.objects.create(job_id=dead.job_id, name=name, value=None, recorded_at=AT,
                               attempt=1, duration=0.1)  # fmt: skip

    done = operations.requeue_from_step("default", dead.job_id, "a", timezone.now())

    assert done.requeued and done.dropped == ["a", "c"]
    assert step_names(dead.job_id) == ["b"]


def test_requeue_from_a_step_not_recorded_is_invalid_and_writes_nothing():
    dead = dead_letter()
    add_steps(dead.job_id, "s1")

    with pytest.raises(InvalidOption, match="has no recorded step 'nope'"):
        job_actions.requeue_from_step("default", dead.job_id, "nope", Actor(0), timezone.now())

    assert DeadLetter.objects.filter(pk=dead.pk).exists()
    assert step_names(dead.job_id) == ["s1"]
    assert not LogEntry.objects.exists()


def test_requeue_from_step_of_a_job_with_no_dead_letter_does_nothing():
    done = operations.requeue_from_step("default", 123456, "s1", timezone.now())

    assert done.dead_letter_id is None and done.job is None and not done.requeued


def test_a_dead_letter_whose_unique_key_a_live_job_holds_stays_with_its_steps():
    q = queue("shop")
    job = q.enqueue({"n": 1}, unique_key="order-1")
    handle = q.claim_one("w")
    assert handle is not None and handle.fail("Boom")
    holder = q.enqueue({"n": 2}, unique_key="order-1")
    add_steps(job.id, "s1", "s2")

    done = operations.requeue_from_step("default", job.id, "s1", timezone.now())

    assert not done.requeued and done.job is not None and done.job.id == holder.id
    assert DeadLetter.objects.filter(job_id=job.id).exists()
    assert step_names(job.id) == ["s1", "s2"]
