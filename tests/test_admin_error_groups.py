"""Error groups: the fingerprint written when a job dies (every dialect), the queue page's
and the error groups page's tables, the changelist filter and the requeue of a group."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone

from django_alkqueue import operations, queue
from django_alkqueue.error_groups import fingerprint
from django_alkqueue.jobs import EXPIRED, MAX_ATTEMPTS_EXCEEDED
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.reports.frequent_errors import frequent_errors
from tests.admin_helpers import DEAD, OVERVIEW, client_for, dead_lettered, make_user, queue_url

pytestmark = pytest.mark.django_db

ERRORS = f"{OVERVIEW}errors/"


def smtp_error(order: int, function: str = "send_receipt") -> str:
    return (
        f"RuntimeError: smtp down for order {order}\n\nTraceback (most recent call last):\n"
        f'  File "/srv/app/shop/emails.py", line 9, in {function}\n    connect()\n'
        f"RuntimeError: smtp down for order {order}"
    )


def requeue_group(client, url: str, confirm: bool):
    data = {"action": "requeue", "select_across": "1", "_selected_action": "all", "index": 0}
    return client.post(url, {**data, "confirm": "yes"} if confirm else data)


def test_a_failed_job_stores_the_fingerprint_of_its_error():
    job_id = dead_lettered("emails", {}, smtp_error(151))
    assert DeadLetter.objects.get(job_id=job_id).error_fingerprint == fingerprint(smtp_error(1))


def test_an_expired_job_stores_the_fingerprint_of_its_reason():
    q = queue("emails")
    q.enqueue({}, expires=timedelta(seconds=1))
    operations.sweep_expired("default", "emails", timezone.now() + timedelta(seconds=5), None)
    assert DeadLetter.objects.get().error_fingerprint == fingerprint(EXPIRED)


def test_a_lapsed_job_out_of_attempts_stores_the_fingerprint_of_its_reason():
    q = queue("emails", lease=1)
    q.enqueue({}, max_attempts=1)
    assert q.claim_one("w-1") is not None
    operations.reclaim("default", timezone.now() + timedelta(seconds=5))
    assert DeadLetter.objects.get().error_fingerprint == fingerprint(MAX_ATTEMPTS_EXCEEDED)


def test_errors_differing_in_numbers_are_one_group_with_count_and_dates():
    for order in (151, 137, 12):
        dead_lettered("emails", {}, smtp_error(order))
    dead_lettered("emails", {}, smtp_error(5, function="resend"))
    groups = frequent_errors("default", "emails")
    assert [(g.title, g.frame, g.count) for g in groups] == [
        ("RuntimeError: smtp down for order <num>", "shop/emails.py in send_receipt", 3),
        ("RuntimeError: smtp down for order <num>", "shop/emails.py in resend", 1),
    ]
    assert groups[0].first_seen <= groups[0].last_seen


def test_the_error_groups_page_names_the_queues_of_each_group(root):
    dead_lettered("emails", {}, smtp_error(1))
    dead_lettered("emails", {}, smtp_error(2))
    dead_lettered("receipts", {}, smtp_error(3))
    (group,) = root.get(ERRORS).context["errors"]
    assert group.count == 3 and group.queues == ["emails", "receipts"]


def test_the_queue_page_counts_only_the_queues_own_letters(root):
    dead_lettered("emails", {}, smtp_error(1))
    dead_lettered("receipts", {}, smtp_error(3))
    (group,) = root.get(queue_url("emails")).context["errors"]
    assert group.count == 1 and group.group_query == f"queue=emails&error={group.fingerprint}"


def test_the_error_group_filter_selects_exactly_the_groups_dead_letters(root):
    mine = {dead_lettered("emails", {}, smtp_error(n)) for n in (1, 2)}
    dead_lettered("emails", {}, "ValueError: bad")
    url = f"{DEAD}?error={fingerprint(smtp_error(0))}"
    response = root.get(url)
    assert {row.job_id for row in response.context["cl"].result_list} == mine
    assert "RuntimeError: smtp down for order &lt;num&gt;" in response.content.decode()


def test_requeue_all_in_a_group_asks_with_the_group_title_then_requeues_only_the_group(root):
    mine = {dead_lettered("emails", {}, smtp_error(n)) for n in (1, 2)}
    other = dead_lettered("emails", {}, "ValueError: bad")
    url = f"{DEAD}?queue=emails&error={fingerprint(smtp_error(0))}"
    ask = requeue_group(root, url, confirm=False)
    assert ask.context["count"] == 2
    assert "error group = RuntimeError: smtp down for order &lt;num&gt;" in ask.content.decode()
    assert requeue_group(root, url, confirm=True).status_code == 302
    assert set(DeadLetter.objects.values_list("job_id", flat=True)) == {other}
    assert set(QueueMessage.objects.values_list("id", flat=True)) == mine


def test_the_queue_page_offers_the_group_requeue_only_with_the_permission():
    dead_lettered("emails", {}, smtp_error(1))
    viewer = client_for(make_user("viewer", "view_queuestat", "view_deadletter"))
    html = viewer.get(queue_url("emails")).content.decode()
    assert "alk-error-link" in html and "Requeue all in this group" not in html


def test_the_error_groups_page_needs_the_view_permission_on_dead_letters():
    viewer = client_for(make_user("viewer", "view_queuestat"))
    assert viewer.get(ERRORS).status_code == 403


def test_the_migration_backfills_the_fingerprints_of_stored_dead_letters():
    backfill = __import__(
        "django_alkqueue.migrations.0005_error_fingerprint", fromlist=["backfill"]
    ).backfill
    ids = [dead_lettered("emails", {}, smtp_error(n)) for n in range(3)]
    DeadLetter.objects.update(error_fingerprint=None)
    backfill(apps, SimpleNamespace(connection=connection))
    stored = set(DeadLetter.objects.filter(job_id__in=ids).values_list("error_fingerprint"))
    assert stored == {(fingerprint(smtp_error(0)),)}


def consumer_error(consumer: str, user: str) -> str:
    return (
        f"KeyError: consumer {consumer} has no {user}\n\nTraceback (most recent call last):\n"
        '  File "/srv/app/shop/emails.py", line 9, in send_receipt\n    connect()\n'
        f"KeyError: consumer {consumer} has no {user}"
    )


def test_errors_naming_different_consumers_and_users_are_one_group(root):
    for consumer, user in (("c1", "user_17b"), ("c4", "user_3"), ("c12", "user_a9")):
        dead_lettered("emails", {}, consumer_error(consumer, user))
    (group,) = root.get(ERRORS).context["errors"]
    assert (group.title, group.count) == ("KeyError: consumer <id> has no <id>", 3)


def test_the_migration_fingerprints_again_the_dead_letters_stored_before_ids_were_normalised():
    refingerprint = __import__(
        "django_alkqueue.migrations.0012_refingerprint_identifiers", fromlist=["backfill"]
    ).backfill
    ids = [dead_lettered("emails", {}, consumer_error(c, "u")) for c in ("c1", "c4")]
    for job_id, old in zip(ids, ("old-c1", "old-c4"), strict=True):
        DeadLetter.objects.filter(job_id=job_id).update(error_fingerprint=old)
    refingerprint(apps, SimpleNamespace(connection=connection))
    stored = set(DeadLetter.objects.filter(job_id__in=ids).values_list("error_fingerprint"))
    assert stored == {(fingerprint(consumer_error("c9", "u")),)}
