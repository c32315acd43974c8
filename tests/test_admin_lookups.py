"""What a URL may ask of a changelist: the declared filters, the search and the id lookups;
anything else is Django's "invalid lookup" redirect. Ids are whole numbers the column holds,
as the URL writes them: no "+", no "_", nothing past 64 bits (issue 33, defects 2 and 3)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.contrib.admin import site
from django.test import RequestFactory

from django_alkqueue.models import Consumer, DeadLetter, QueueMessage, Worker
from tests.admin_helpers import (
    CONSUMERS,
    DEAD,
    JOBS,
    VIEW_PERMS,
    WORKERS,
    Seeded,
    add_worker,
    client_for,
    make_user,
)

pytestmark = pytest.mark.django_db

CHANGELISTS = [JOBS, DEAD, CONSUMERS, WORKERS]
HOSTILE_LOOKUPS = [
    ("last_error__regex", "^(a+)+$"),  # catastrophic backtracking, seconds per request
    ("last_error__regex", "\\"),  # an invalid pattern: the database raises
    ("payload__contains", "x"),  # a JSON lookup the database may not support
    ("last_error__icontains", ""),  # a full scan of every error text
    ("queue__startswith", "shop"),
    ("priority__gt", "0"),
    ("claim_token__isnull", "True"),
]
BAD_IDS = [
    "+99999999999999999999",
    "1_000_000_000_000_000_000_000",
    "99999999999999999999",
    "-99999999999999999999",
    "+1",
    "1_0",
    "١٢",  # Arabic-Indic digits: int() reads them, a database does not
]


@pytest.fixture
def viewer():
    return client_for(make_user("viewer", *VIEW_PERMS))


def refused(response, url: str) -> bool:
    """Django's invalid-lookup redirect: back to the bare changelist with ?e=1."""
    return response.status_code == 302 and response["Location"].endswith(url.split("?")[0] + "?e=1")


@pytest.mark.parametrize("url", CHANGELISTS)
def test_a_lookup_no_filter_declares_is_the_invalid_lookup_redirect(seeded, viewer, url):
    for lookup, value in HOSTILE_LOOKUPS:
        full = f"{url}?{urlencode({lookup: value})}"
        assert refused(viewer.get(full), full), full


def test_the_invalid_lookup_redirect_lands_on_a_page_that_renders(seeded, viewer):
    response = viewer.get(f"{DEAD}?last_error__regex=%5E(a%2B)%2B%24", follow=True)
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("url", "query"),
    [
        (JOBS, {"queue": "shop-emails", "state": "pending"}),
        (JOBS, {"id__in": "1,2,3"}),
        (JOBS, {"id": "-5"}),
        (JOBS, {"id__exact": "9223372036854775807"}),
        (JOBS, {"q": "unknown-key"}),
        (DEAD, {"queue": "shop-webhooks", "reason": "failed"}),
        (DEAD, {"died_at__gte": "2020-01-01 00:00+00:00", "died_at__lt": "2100-01-01 00:00+00:00"}),
        (DEAD, {"job_id": "3"}),
        (WORKERS, {"heartbeat": "live"}),
        (CONSUMERS, {"q": "shop"}),
    ],
)
def test_the_declared_filters_search_and_id_lookups_still_work(seeded, viewer, url, query):
    assert viewer.get(f"{url}?{urlencode(query)}").status_code == 200


def test_an_id_lookup_lists_exactly_its_rows(seeded: Seeded, viewer):
    wanted = seeded.pending[:2]
    response = viewer.get(f"{JOBS}?id__in={','.join(map(str, wanted))}")
    assert sorted(job.id for job in response.context["cl"].result_list) == sorted(wanted)


@pytest.mark.parametrize("url", CHANGELISTS)
def test_an_id_the_column_cannot_hold_is_the_invalid_lookup_redirect(seeded, viewer, url):
    for param in ("id", "id__exact", "id__in"):
        for value in BAD_IDS:
            full = f"{url}?{urlencode({param: value})}"
            assert refused(viewer.get(full), full), full


def test_an_id_list_with_one_bad_member_is_refused_whole(seeded, viewer):
    full = f"{JOBS}?id__in=1,2,%2B3"
    assert refused(viewer.get(full), full)


@pytest.mark.parametrize("term", ["+1", "1_0", "99999999999999999999"])
def test_a_search_term_that_is_no_id_matches_no_id(seeded: Seeded, viewer, term):
    response = viewer.get(f"{JOBS}?{urlencode({'q': term})}")
    assert response.status_code == 200
    assert response.context["cl"].result_count == 0


# -- actions posted with ids the primary key cannot hold ------------------------------------


PAGES = {QueueMessage: JOBS, DeadLetter: DEAD, Consumer: CONSUMERS, Worker: WORKERS}
ALL_ACTIONS = sorted(
    (url, name)
    for model, url in PAGES.items()
    for name in {
        *(a if isinstance(a, str) else a.__name__ for a in site._registry[model].actions or ()),
        "delete_selected",
    }
)


def offered_to(user, url: str, action: str) -> bool:
    request = RequestFactory().get(url)
    request.user = user
    model = next(m for m, page in PAGES.items() if page == url)
    return action in site._registry[model].get_actions(request)


def table_rows() -> list[int]:
    return [m.objects.count() for m in (QueueMessage, DeadLetter, Consumer, Worker)]


@pytest.mark.parametrize(("url", "action"), ALL_ACTIONS)
def test_an_action_posted_with_a_malformed_id_is_a_400_that_changes_nothing(
    seeded: Seeded, root_user, root, url, action
):
    if not offered_to(root_user, url, action):
        pytest.skip(f"{url} offers {action} to no one")
    add_worker("w-1")
    before = table_rows()
    post = {"action": action, "index": 0, "confirm": "yes", "post": "yes", "priority": 7}
    for bad in ["abc", "+99999999999999999999", "1_000", str(2**64), ""]:
        response = root.post(url, {**post, "_selected_action": [seeded.pending[0], bad]})
        assert response.status_code == 400, bad
    assert table_rows() == before


@pytest.mark.parametrize("bad", ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>'])
def test_the_400_for_a_malformed_id_does_not_echo_it_as_html(seeded: Seeded, root, bad):
    """The 400 names the value it refuses: as plain text, and escaped, so a page that posts a
    forged id cannot make the admin's origin run its script."""
    post = {"action": "cancel", "index": 0, "_selected_action": [seeded.pending[0], bad]}
    response = root.post(JOBS, post)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    assert "<" not in response.content.decode() and ">" not in response.content.decode()


def test_a_well_formed_selection_still_runs_the_action(seeded: Seeded, root):
    post = {"action": "cancel", "index": 0, "confirm": "yes", "_selected_action": seeded.pending}
    assert root.post(JOBS, post).status_code == 302
    assert not QueueMessage.objects.filter(id__in=seeded.pending).exists()


# -- NUL characters, which PostgreSQL refuses in a parameter ---------------------------------


@pytest.mark.parametrize("url", [JOBS, DEAD])
def test_a_nul_in_a_filter_value_is_the_invalid_lookup_redirect(seeded, viewer, url):
    full = f"{url}?queue=shop%00emails"
    assert refused(viewer.get(full), full)


def test_a_nul_in_a_queue_page_name_is_not_found(seeded, root):
    assert root.get("/admin/django_alkqueue/queuestat/queue/shop%00emails/").status_code == 404


def test_an_empty_to_field_means_the_primary_key_on_every_detail_page(seeded: Seeded, root):
    job, dead = seeded.pending[0], DeadLetter.objects.get(job_id=seeded.dead[0]).pk
    consumer = Consumer.objects.get(queue="shop-emails").pk
    for url in (
        f"{JOBS}{job}/change/",
        f"{JOBS}{job}/history/",
        f"{DEAD}{dead}/change/",
        f"{DEAD}{dead}/delete/",
        f"{CONSUMERS}{consumer}/delete/",
    ):
        assert root.get(f"{url}?_to_field=").status_code == 200, url
