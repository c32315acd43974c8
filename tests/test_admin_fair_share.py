"""Fair share in the admin: on the queue page, the fair keys with unclaimed jobs, their
weights and their share of the last hour's claims, and the weight form, offered to whoever
may change consumers and logged; on the job and dead letter pages, the fair key (masked on a
sensitive queue), which a requeue keeps."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.test import override_settings
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import (
    Consumer,
    DeadLetter,
    FairClaims,
    QueueMessage,
    fair_claims_bucket,
)
from django_alkqueue.privacy import MASK
from tests.admin_helpers import DEAD, JOBS, VIEW_PERMS, client_for, make_user, queue_url

pytestmark = pytest.mark.django_db

QUEUE = "tenants"


@pytest.fixture
def tenants() -> Consumer:
    queue(QUEUE).enqueue_many(range(3), fair_key="acme")
    queue(QUEUE).enqueue(9, fair_key="globex")
    return Consumer.objects.create(queue=QUEUE, handler="app.run", lease=30, max_attempts=3,
                                   fair_weights={"acme": 4})  # fmt: skip


def test_the_queue_page_lists_the_fair_keys_with_their_jobs_and_weights(
    root, tenants: Consumer
) -> None:
    page = root.get(queue_url(QUEUE)).content.decode()
    assert 'data-fair-key="acme"><td>acme</td><td class="num">3</td><td class="num">4</td>' in page
    assert 'data-fair-key="globex"><td>globex</td><td class="num">1</td><td class="num">1</td>' in (
        page
    )


def claims_now(**per_key: int) -> None:
    """Fair claims of QUEUE in the current bucket; the keyword `none` is the no-key key's."""
    bucket = fair_claims_bucket(timezone.now())
    for key, claims in per_key.items():
        key = "" if key == "none" else key
        FairClaims.objects.create(queue=QUEUE, fair_key=key, bucket=bucket, claims=claims)


def test_the_queue_page_shows_each_keys_share_of_the_last_hours_claims(
    root, tenants: Consumer
) -> None:
    claims_now(acme=3, globex=1)
    page = root.get(queue_url(QUEUE)).content.decode()
    assert "Share of claims, last hour" in page
    assert '<td class="num">4</td><td class="num">75.0%</td>' in page
    assert '<td class="num">1</td><td class="num">25.0%</td>' in page


def test_without_fair_claims_in_the_hour_the_share_is_a_dash(root, tenants: Consumer) -> None:
    page = root.get(queue_url(QUEUE)).content.decode()
    assert '<td class="num">4</td><td class="num">-</td>' in page


def test_the_queue_page_lists_the_claims_of_the_jobs_without_a_fair_key_as_no_key(
    root, tenants: Consumer
) -> None:
    claims_now(acme=1, none=1)
    page = root.get(queue_url(QUEUE)).content.decode()
    assert 'data-fair-key=""><td>(no key)</td><td class="num">-</td><td class="num">1</td>' \
        '<td class="num">50.0%</td>' in page  # fmt: skip


def test_a_key_with_claims_and_no_unclaimed_job_is_listed(root, tenants: Consumer) -> None:
    claims_now(initech=1)
    page = root.get(queue_url(QUEUE)).content.decode()
    assert 'data-fair-key="initech"><td>initech</td><td class="num">0</td>' in page


@override_settings(ALKQUEUE={"QUEUES": {QUEUE: {"sensitive": True}}})
def test_a_viewer_who_may_not_see_payloads_sees_the_keys_with_claims_masked(
    tenants: Consumer,
) -> None:
    claims_now(initech=1, none=1)
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    page = viewer.get(queue_url(QUEUE)).content.decode()
    for key in ("acme", "globex", "initech"):
        assert key not in page
    assert f'<td>{MASK}</td><td class="num">0</td><td class="num">1</td>' \
        '<td class="num">50.0%</td>' in page  # fmt: skip
    assert "<td>(no key)</td>" in page


def test_an_operator_who_may_change_consumers_sets_a_weight_and_it_is_logged(
    root, tenants: Consumer
) -> None:
    response = root.post(queue_url(QUEUE), {"fair_key": "globex", "weight": "7"})
    assert response.status_code == 302
    tenants.refresh_from_db()
    assert tenants.fair_weights == {"acme": 4, "globex": 7}
    entry = LogEntry.objects.get()
    assert entry.change_message.startswith("set fair weight: 1 consumer")
    assert "fair key globex weight 7" in entry.change_message


def test_an_empty_weight_drops_the_one_set_here(root, tenants: Consumer) -> None:
    root.post(queue_url(QUEUE), {"fair_key": "acme", "weight": ""})
    tenants.refresh_from_db()
    assert tenants.fair_weights == {}


def test_a_bad_weight_writes_nothing_and_says_why(root, tenants: Consumer) -> None:
    response = root.post(queue_url(QUEUE), {"fair_key": "acme", "weight": "0"}, follow=True)
    assert "The weight was not set" in response.content.decode()
    tenants.refresh_from_db()
    assert tenants.fair_weights == {"acme": 4}
    assert not LogEntry.objects.exists()


def test_a_viewer_sees_no_form_and_may_not_post(tenants: Consumer) -> None:
    client = client_for(make_user("viewer", *VIEW_PERMS))
    assert 'id="alk-fair-weight-form"' not in client.get(queue_url(QUEUE)).content.decode()
    assert client.post(queue_url(QUEUE), {"fair_key": "acme", "weight": "2"}).status_code == 403
    tenants.refresh_from_db()
    assert tenants.fair_weights == {"acme": 4}


def test_a_weight_posted_to_a_queue_name_no_queue_can_have_is_404_and_writes_nothing(
    root, tenants: Consumer
) -> None:
    url = queue_url('q<img src=x onerror=alert("q")>')
    assert root.post(url, {"fair_key": "acme", "weight": "2"}).status_code == 404
    tenants.refresh_from_db()
    assert tenants.fair_weights == {"acme": 4}
    assert not LogEntry.objects.exists()


# -- the fair key of a job and of a dead letter ----------------------------------------------


def dead_lettered_with_key(name: str = QUEUE, key: str = "acme") -> DeadLetter:
    """A job of `name` with fair key `key`, failed: its dead letter."""
    job = queue(name).enqueue({}, priority=100, fair_key=key)  # claimed first
    handle = queue(name).claim_one("w")
    assert handle is not None and handle.job.id == job.id and handle.fail("boom")
    return DeadLetter.objects.get(job_id=job.id)


def fair_key_field(html: str) -> str:
    """The text of the page's fair key field."""
    start = html.index('<div class="readonly">', html.index("fieldBox field-fair_key"))
    return html[start + len('<div class="readonly">') : html.index("</div>", start)]


def test_the_job_page_shows_the_fair_key(root) -> None:
    job = queue(QUEUE).enqueue({}, fair_key="acme")
    assert fair_key_field(root.get(f"{JOBS}{job.id}/change/").content.decode()) == "acme"


def test_the_dead_letter_page_shows_the_fair_key(root) -> None:
    dead = dead_lettered_with_key()
    assert fair_key_field(root.get(f"{DEAD}{dead.pk}/change/").content.decode()) == "acme"


@override_settings(ALKQUEUE={"QUEUES": {QUEUE: {"sensitive": True}}})
def test_a_viewer_who_may_not_see_payloads_sees_the_fair_key_masked() -> None:
    dead = dead_lettered_with_key(key="patient-ada")
    job = queue(QUEUE).enqueue({}, fair_key="patient-bob")
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    for url, key in ((f"{DEAD}{dead.pk}/change/", "patient-ada"),
                     (f"{JOBS}{job.id}/change/", "patient-bob")):  # fmt: skip
        html = viewer.get(url).content.decode()
        assert fair_key_field(html) == MASK, url
        assert key not in html, url


def test_the_requeue_action_gives_the_job_its_fair_key_back(root) -> None:
    dead = dead_lettered_with_key()
    response = root.post(DEAD, {"action": "requeue", "_selected_action": [dead.pk], "index": 0})
    assert response.status_code == 302
    assert QueueMessage.objects.get(id=dead.job_id).fair_key == "acme"
