"""The schedule of a sensitive queue shows its payload masked, as the queue's jobs do (issue
48, defect 11): the schedules page to users without `view_payload`, and `alk_periodic`
unless given --show-payloads."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import override_settings

from django_alkqueue.models import Consumer, PeriodicTick
from django_alkqueue.periodic import ensure_rows
from django_alkqueue.privacy import MASK
from tests.admin_helpers import client_for, make_user

pytestmark = pytest.mark.django_db

SCHEDULES = "/admin/django_alkqueue/periodictick/"
EMAIL = "ceo@example.com"
PERIODIC = {
    "ceo-report": {"cron": "0 7 * * *", "queue": "reports", "payload": {"to": EMAIL}},
    "ping": {"cron": "*/5 * * * *", "queue": "health", "payload": {"ping": "pong"}},
}
SENSITIVE = override_settings(
    ALKQUEUE={"PERIODIC": PERIODIC, "QUEUES": {"reports": {"sensitive": True}}}
)


@pytest.fixture
def viewer():
    return client_for(make_user("viewer", "view_periodictick"))


def alk_periodic(*args: str) -> str:
    out = io.StringIO()
    call_command("alk_periodic", *args, stdout=out)
    return out.getvalue()


def page_of(client, name: str) -> str:
    ensure_rows("default", list(PERIODIC))
    return client.get(
        f"{SCHEDULES}{PeriodicTick.objects.get(name=name).pk}/change/"
    ).content.decode()


@SENSITIVE
def test_the_schedules_list_masks_a_sensitive_queues_payload(viewer):
    html = viewer.get(SCHEDULES).content.decode()

    assert EMAIL not in html
    assert f"payload {{&#x27;to&#x27;: &#x27;{MASK}&#x27;}} on reports" in html
    assert "payload {&#x27;ping&#x27;: &#x27;pong&#x27;} on health" in html


@SENSITIVE
def test_a_sensitive_schedules_page_masks_its_payload(viewer):
    html = page_of(viewer, "ceo-report")
    assert EMAIL not in html and f"&#x27;{MASK}&#x27;" in html


@SENSITIVE
def test_view_payload_shows_a_sensitive_schedules_payload():
    reader = client_for(make_user("reader", "view_periodictick", "view_payload"))
    assert EMAIL in reader.get(SCHEDULES).content.decode()
    assert EMAIL in page_of(reader, "ceo-report")


@override_settings(ALKQUEUE={"PERIODIC": PERIODIC})
def test_a_schedule_of_a_queue_a_worker_marked_sensitive_is_masked(viewer):
    Consumer.objects.create(queue="reports", handler="elsewhere.consumers.report", lease=30,
                            max_attempts=3, sensitive=True)  # fmt: skip
    assert EMAIL not in viewer.get(SCHEDULES).content.decode()


@SENSITIVE
def test_alk_periodic_masks_a_sensitive_queues_payload():
    out = alk_periodic()

    assert EMAIL not in out
    assert f"payload {{'to': '{MASK}'}}" in out and "payload {'ping': 'pong'}" in out


@SENSITIVE
def test_alk_periodic_show_payloads_prints_them_whole():
    assert f"payload {{'to': '{EMAIL}'}}" in alk_periodic("--show-payloads")
