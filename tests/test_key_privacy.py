"""The unique and concurrency keys of a sensitive queue are withheld as its payloads are
(issue 48, defect 9): a key is often made from the payload (an e-mail address, a customer
id). A user without `view_payload` sees them masked on every page, the busiest keys without
their links, and cannot confirm a guessed key by searching or filtering for it; `alk_status`
masks them unless asked with --show-keys."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import Consumer, DeadLetter, FinishedJob
from django_alkqueue.privacy import MASK
from tests.admin_helpers import (
    ADMIN,
    DEAD,
    JOBS,
    OVERVIEW,
    VIEW_PERMS,
    client_for,
    dead_lettered,
    make_user,
    queue_url,
)

pytestmark = pytest.mark.django_db

EMAIL = "jane@example.com"
PAYMENTS = "shop-payments"
SENSITIVE = override_settings(ALKQUEUE={"QUEUES": {PAYMENTS: {"sensitive": True}}})
FINISHED = f"{ADMIN}/finishedjob/"


@pytest.fixture
def viewer():
    return client_for(make_user("viewer", *VIEW_PERMS, "view_finishedjob"))


@pytest.fixture
def reader():
    return client_for(make_user("reader", *VIEW_PERMS, "view_finishedjob", "view_payload"))


def keyed_job(name: str = PAYMENTS) -> int:
    return queue(name).enqueue({"card": "4111"}, unique_key=EMAIL, concurrency_key=EMAIL).id


def limited_payments() -> None:
    """shop-payments with key_concurrency 1: jane's one job runs, another waits."""
    Consumer.objects.create(queue=PAYMENTS, handler="shop.consumers.charge", lease=30,
                            max_attempts=3, code_limits={"key_concurrency": 1})  # fmt: skip
    q = queue(PAYMENTS)
    q.enqueue_many([{}] * 2, concurrency_key=EMAIL)
    assert len(q.claim("w", 2)) == 1


def listed(client, url: str) -> set[int]:
    response = client.get(url)
    assert response.status_code == 200, url
    return {row.pk for row in response.context["cl"].result_list}


@SENSITIVE
def test_a_sensitive_jobs_keys_are_masked_on_its_page(viewer):
    html = viewer.get(f"{JOBS}{keyed_job()}/change/").content.decode()

    assert EMAIL not in html
    assert html.count(f'<div class="readonly">{MASK}</div>') == 2


@SENSITIVE
def test_a_sensitive_dead_letters_unique_key_is_masked_on_its_page(viewer):
    job_id = dead_lettered(PAYMENTS, {"card": "4111"}, "DeclinedError")
    DeadLetter.objects.filter(job_id=job_id).update(unique_key=EMAIL)
    dead = DeadLetter.objects.get(job_id=job_id)

    html = viewer.get(f"{DEAD}{dead.pk}/change/").content.decode()

    assert EMAIL not in html and f'<div class="readonly">{MASK}</div>' in html


@SENSITIVE
def test_a_sensitive_finished_jobs_keys_are_masked_on_its_page(viewer):
    now = timezone.now()
    FinishedJob.objects.create(
        job_id=7, queue=PAYMENTS, payload={}, attempts=1, max_attempts=3, backoff_base=5,
        lease=30, unique_key=EMAIL, concurrency_key=EMAIL, enqueued_at=now, started_at=now,
        finished_at=now, duration=0.1, worker_id="host:1", outcome="succeeded",
        delete_after=now + timedelta(days=1),
    )  # fmt: skip

    html = viewer.get(f"{FINISHED}7/change/").content.decode()

    assert EMAIL not in html
    assert html.count(f'<div class="readonly">{MASK}</div>') == 2


@SENSITIVE
def test_a_job_without_keys_shows_no_mask_for_them(viewer):
    job_id = queue(PAYMENTS).enqueue({"card": "4111"}).id
    html = viewer.get(f"{JOBS}{job_id}/change/").content.decode()
    assert f'<div class="readonly">{MASK}</div>' not in html


@SENSITIVE
def test_view_payload_shows_a_sensitive_jobs_keys(reader):
    html = reader.get(f"{JOBS}{keyed_job()}/change/").content.decode()
    assert EMAIL in html and f'<div class="readonly">{MASK}</div>' not in html


@SENSITIVE
def test_the_job_list_masks_the_concurrency_key_of_sensitive_jobs_only(viewer):
    keyed_job()
    queue("shop-emails").enqueue({}, concurrency_key="plain-key")

    html = viewer.get(JOBS).content.decode()

    assert EMAIL not in html and "plain-key" in html
    assert f'<div class="alk-sub" title="concurrency key">{MASK}</div>' in html


@SENSITIVE
def test_a_search_by_a_sensitive_jobs_unique_key_finds_it_only_for_view_payload(viewer, reader):
    job_id = keyed_job()

    assert listed(viewer, f"{JOBS}?q={EMAIL}") == set()
    assert listed(viewer, f"{JOBS}?q={job_id}") == {job_id}  # its id still finds it
    assert listed(reader, f"{JOBS}?q={EMAIL}") == {job_id}


@SENSITIVE
def test_a_filter_by_a_sensitive_jobs_concurrency_key_finds_it_only_for_view_payload(
    viewer, reader
):
    job_id = keyed_job()
    plain = queue("shop-emails").enqueue({}, concurrency_key=EMAIL).id
    url = f"{JOBS}?concurrency_key={EMAIL}"

    assert listed(viewer, url) == {plain}
    assert listed(reader, url) == {plain, job_id}


@SENSITIVE
def test_a_search_of_the_finished_jobs_by_a_sensitive_concurrency_key_finds_nothing(viewer):
    now = timezone.now()
    FinishedJob.objects.create(
        job_id=8, queue=PAYMENTS, payload={}, attempts=1, max_attempts=3, backoff_base=5,
        lease=30, concurrency_key=EMAIL, enqueued_at=now, finished_at=now, worker_id="host:1",
        outcome="succeeded", delete_after=now + timedelta(days=1),
    )  # fmt: skip
    response = viewer.get(f"{FINISHED}?q={EMAIL}")
    assert [row.job_id for row in response.context["cl"].result_list] == []


@SENSITIVE
def test_the_queue_page_masks_a_sensitive_queues_busiest_keys_and_does_not_link_them(viewer):
    limited_payments()

    response = viewer.get(queue_url(PAYMENTS))

    html = response.content.decode()
    assert [(k.key, k.running, k.pending) for k in response.context["flow"].busiest_keys] == [
        (MASK, 1, 1)
    ]
    assert EMAIL not in html and "jane%40example.com" not in html
    assert "concurrency_key=" not in html


@SENSITIVE
def test_the_overview_masks_a_sensitive_queues_busiest_keys(viewer):
    limited_payments()

    response = viewer.get(OVERVIEW)

    (flow,) = response.context["flows"]
    assert [k.key for k in flow.busiest_keys] == [MASK]
    assert EMAIL not in response.content.decode()
    assert "concurrency_key=" not in response.content.decode()


@SENSITIVE
def test_view_payload_shows_and_links_a_sensitive_queues_busiest_keys(reader):
    limited_payments()

    html = reader.get(queue_url(PAYMENTS)).content.decode()

    assert "concurrency_key=jane%40example.com" in html


# -- alk_status ------------------------------------------------------------------------------


def alk_status(*args: str) -> str:
    out = io.StringIO()
    call_command("alk_status", *args, stdout=out)
    return out.getvalue()


def busiest_line(text: str, name: str) -> str:
    (line,) = [row for row in text.splitlines() if row.startswith(name + " ") and "/" in row]
    return line


@SENSITIVE
def test_alk_status_masks_a_sensitive_queues_busiest_keys():
    limited_payments()

    text = alk_status()

    assert EMAIL not in text
    assert busiest_line(text, PAYMENTS).endswith(f"{MASK} 1/1")


@SENSITIVE
def test_alk_status_json_masks_a_sensitive_queues_busiest_keys():
    limited_payments()

    (row,) = [q for q in json.loads(alk_status("--json"))["queues"] if q["queue"] == PAYMENTS]

    assert row["flow"]["busiest_keys"] == [{"key": MASK, "running": 1, "pending": 1}]


@SENSITIVE
def test_alk_status_show_keys_prints_a_sensitive_queues_busiest_keys():
    limited_payments()

    assert busiest_line(alk_status("--show-keys"), PAYMENTS).endswith(f"{EMAIL} 1/1")


def test_alk_status_prints_the_busiest_keys_of_a_queue_that_is_not_sensitive():
    limited_payments()

    assert busiest_line(alk_status(), PAYMENTS).endswith(f"{EMAIL} 1/1")
