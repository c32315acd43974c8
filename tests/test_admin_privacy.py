"""Payload privacy in the admin: a sensitive queue's payloads are shown whole only to users
with `view_payload`; others see the keys with the values masked, on the job and the dead
letter pages alike (issue 33, payload privacy)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import override_settings

from django_alkqueue import queue
from django_alkqueue.models import DeadLetter
from django_alkqueue.privacy import MASK
from tests.admin_helpers import DEAD, JOBS, VIEW_PERMS, client_for, dead_lettered, make_user

pytestmark = pytest.mark.django_db

CARD = "4111 1111 1111 1111"
SENSITIVE = override_settings(ALKQUEUE={"QUEUES": {"shop-payments": {"sensitive": True}}})


@pytest.fixture
def card_job() -> int:
    return queue("shop-payments").enqueue({"card": CARD, "items": [{"sku": "A-1"}]}).id


@pytest.fixture
def card_dead_letter() -> int:
    job_id = dead_lettered("shop-payments", {"card": CARD}, "DeclinedError: card declined")
    return DeadLetter.objects.get(job_id=job_id).pk


def job_page(job_id: int) -> str:
    return f"{JOBS}{job_id}/change/"


def dead_page(dead_id: int) -> str:
    return f"{DEAD}{dead_id}/change/"


def test_the_permissions_exist_after_migrating():
    codenames = set(
        Permission.objects.filter(content_type__app_label="django_alkqueue").values_list(
            "codename", flat=True
        )
    )
    assert {"view_payload", "view_session_sql"} <= codenames


@SENSITIVE
def test_a_viewer_without_view_payload_sees_the_keys_and_masked_values(card_job, card_dead_letter):
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    for url in (job_page(card_job), dead_page(card_dead_letter)):
        html = viewer.get(url).content.decode()
        assert CARD not in html, url
        assert "&quot;card&quot;: &quot;***&quot;" in html, url
        assert "values are masked" in html, url


@SENSITIVE
def test_view_payload_shows_the_payload_whole(card_job, card_dead_letter):
    reader = client_for(make_user("reader", *VIEW_PERMS, "view_payload"))
    for url in (job_page(card_job), dead_page(card_dead_letter)):
        html = reader.get(url).content.decode()
        assert CARD in html, url
        assert "values are masked" not in html, url


@SENSITIVE
def test_a_superuser_sees_the_payload_whole(card_job, root):
    assert CARD in root.get(job_page(card_job)).content.decode()


def test_a_queue_that_is_not_sensitive_shows_its_payload_to_every_viewer(card_job):
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    assert CARD in viewer.get(job_page(card_job)).content.decode()


@SENSITIVE
def test_a_masked_payload_keeps_its_shape(card_job):
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    html = viewer.get(job_page(card_job)).content.decode()
    assert "&quot;items&quot;" in html and "&quot;sku&quot;" in html
    assert "A-1" not in html and MASK in html


@SENSITIVE
def test_no_changelist_shows_a_sensitive_payload(card_job, card_dead_letter):
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    for url in (JOBS, DEAD, f"{JOBS}?q={card_job}", f"{DEAD}?queue=shop-payments"):
        assert CARD not in viewer.get(url).content.decode(), url


@SENSITIVE
def test_a_confirmation_page_shows_no_sensitive_payload(card_job, card_dead_letter):
    operator = client_for(
        make_user("operator", *VIEW_PERMS, "cancel_queuemessage", "requeue_deadletter")
    )
    asked = operator.post(JOBS, {"action": "cancel", "index": 0, "_selected_action": [card_job]})
    assert asked.status_code == 200 and CARD not in asked.content.decode()
    done = operator.post(
        DEAD, {"action": "requeue", "index": 0, "_selected_action": [card_dead_letter]}, follow=True
    )
    assert done.status_code == 200 and CARD not in done.content.decode()
