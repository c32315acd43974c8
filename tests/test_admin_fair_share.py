"""Fair share on the admin's queue page: the fair keys with unclaimed jobs and their weights,
and the weight form, offered to whoever may change consumers and logged."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry

from django_alkqueue import queue
from django_alkqueue.models import Consumer
from tests.admin_helpers import VIEW_PERMS, client_for, make_user, queue_url

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
