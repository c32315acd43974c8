"""Every admin page renders for a superuser and for a view-only staff user, redirects
anonymous users to the login page, and refuses what a user may not do."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.test import Client

from django_alkqueue.admin.compat import DETAIL_PAGE_ACTIONS
from django_alkqueue.models import Consumer, DeadLetter, Worker
from tests.admin_helpers import (
    CONSUMERS,
    DEAD,
    JOBS,
    OVERVIEW,
    VIEW_PERMS,
    WORKERS,
    add_worker,
    client_for,
    make_user,
    queue_url,
)

needs_detail_page_actions = pytest.mark.skipif(
    not DETAIL_PAGE_ACTIONS, reason="actions on the detail page need Django 6.1"
)

pytestmark = pytest.mark.django_db


def page_urls(seeded) -> list[str]:
    job = seeded.pending[0]
    dead = DeadLetter.objects.first()
    consumer = Consumer.objects.get(queue="shop-emails")
    worker = add_worker("host:1")
    return [
        OVERVIEW,
        queue_url("shop-emails"),
        queue_url("shop-webhooks"),
        JOBS,
        f"{JOBS}?queue=shop-emails",
        f"{JOBS}?state=pending",
        f"{JOBS}?state=scheduled",
        f"{JOBS}?state=claimed",
        f"{JOBS}?q={job}",
        f"{JOBS}{job}/change/",
        DEAD,
        f"{DEAD}?queue=shop-webhooks&reason=failed",
        f"{DEAD}?died_at__gte=2000-01-01+00:00:00%2B00:00",
        f"{DEAD}{dead.pk}/change/",
        CONSUMERS,
        f"{CONSUMERS}{consumer.pk}/change/",
        WORKERS,
        f"{WORKERS}?heartbeat=stale",
        f"{WORKERS}{worker.pk}/change/",
    ]


def test_every_page_renders_for_a_superuser(seeded):
    client = client_for(make_user("root", superuser=True))
    for url in page_urls(seeded):
        response = client.get(url)
        assert response.status_code == 200, url


def test_the_admin_index_links_the_overview_from_the_apps_section(seeded):
    response = client_for(make_user("root", superuser=True)).get("/admin/")
    assert f'href="{OVERVIEW}"' in response.content.decode()


def test_the_overview_link_reads_queue_overview(seeded):
    response = client_for(make_user("root", superuser=True)).get("/admin/")
    models = next(a for a in response.context["app_list"] if a["app_label"] == "django_alkqueue")
    names = {m["admin_url"]: str(m["name"]) for m in models["models"]}
    assert names[OVERVIEW] == "Queue overview"


def app_entries(html: str) -> list[str]:
    """The admin URLs of the app's entries, in the order the page lists them."""
    section = html.split('class="app-django_alkqueue')[1].split("</table>")[0]
    return re.findall(r'<th scope="row"[^>]*>\s*<a href="([^"]+)"', section)


@pytest.mark.parametrize("url", ["/admin/", "/admin/django_alkqueue/", JOBS])
def test_the_queue_overview_comes_first_in_the_apps_section(seeded, url):
    html = client_for(make_user("root", superuser=True)).get(url).content.decode()
    entries = app_entries(html)
    assert entries[0] == OVERVIEW
    assert entries[1:] == sorted(entries[1:], key=lambda u: ADMIN_NAMES[u])


#: The app's other entries, listed alphabetically by Django after the overview.
ADMIN_NAMES = {
    "/admin/django_alkqueue/batch/": "Batches",
    CONSUMERS: "Consumers",
    DEAD: "Dead letters",
    "/admin/django_alkqueue/finishedjob/": "Finished jobs",
    JOBS: "Jobs",
    "/admin/django_alkqueue/periodictick/": "Periodic schedules",
    WORKERS: "Workers",
}


def test_a_site_without_overview_first_lists_the_app_alphabetically(seeded, rf):
    from django.contrib.admin import AdminSite

    from django_alkqueue.admin_site import AdminSite as OverviewFirstSite

    request = rf.get("/admin/")
    request.user = make_user("root", superuser=True)
    plain, ours = AdminSite(), OverviewFirstSite()
    for site in (plain, ours):
        site._registry = admin.site._registry
    first = [a["models"][0]["object_name"] for a in ours.get_app_list(request)
             if a["app_label"] == "django_alkqueue"]  # fmt: skip
    assert first == ["QueueStat"]
    plain_names = [str(m["name"]) for a in plain.get_app_list(request)
                   if a["app_label"] == "django_alkqueue" for m in a["models"]]  # fmt: skip
    assert plain_names == sorted(plain_names)


def test_every_page_renders_for_a_view_only_user_without_action_buttons(seeded):
    client = client_for(make_user("viewer", *VIEW_PERMS))
    for url in page_urls(seeded):
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert 'name="action"' not in html, url
        assert 'name="CHANGE_FORM-action"' not in html, url
        assert "alk-requeue-all" not in html, url


def test_a_superuser_sees_the_actions(seeded):
    client = client_for(make_user("root", superuser=True))
    assert 'value="requeue"' in client.get(DEAD).content.decode()
    assert 'value="cancel"' in client.get(JOBS).content.decode()
    assert 'value="pause"' in client.get(CONSUMERS).content.decode()
    assert "alk-requeue-all" in client.get(DEAD).content.decode()
    if DETAIL_PAGE_ACTIONS:
        detail = client.get(f"{JOBS}{seeded.pending[0]}/change/").content.decode()
        assert 'name="CHANGE_FORM-action"' in detail


def test_anonymous_users_are_sent_to_the_login_page(seeded):
    client = Client()
    for url in page_urls(seeded):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/"), url


def test_staff_without_view_permission_is_refused(seeded):
    client = client_for(make_user("nobody"))
    assert client.get(OVERVIEW).status_code == 403
    assert client.get(queue_url("shop-emails")).status_code == 403
    assert client.get(JOBS).status_code == 403
    assert client.get(DEAD).status_code == 403


def action_post(url: str, action: str, selected: int) -> dict[str, object]:
    return {
        "action": action,
        "_selected_action": [selected],
        "index": 0,
        "confirm": "yes",
        "post": "yes",  # Django's own delete_selected confirms with post=yes
        "priority": 5,
    }


def a_row_of(url: str, seeded) -> int:
    return {
        JOBS: lambda: seeded.pending[0],
        DEAD: lambda: DeadLetter.objects.first().pk,
        CONSUMERS: lambda: Consumer.objects.first().pk,
        WORKERS: lambda: add_worker("host:9").pk,
    }[url]()


@pytest.mark.parametrize(
    ("url", "action"),
    [
        (JOBS, "cancel"),
        (JOBS, "run_now"),
        (JOBS, "change_priority"),
        (JOBS, "delete_selected"),
        (DEAD, "requeue"),
        (DEAD, "delete_selected"),
        (CONSUMERS, "pause"),
        (CONSUMERS, "resume"),
        (CONSUMERS, "delete_selected"),
        (WORKERS, "delete_selected"),
    ],
)
def test_actions_posted_by_a_view_only_user_are_refused_with_403(seeded, url, action):
    client = client_for(make_user("viewer", *VIEW_PERMS))
    assert client.post(url, action_post(url, action, a_row_of(url, seeded))).status_code == 403


@pytest.mark.parametrize("url", [JOBS, DEAD, CONSUMERS, WORKERS])
def test_djangos_delete_selected_posted_by_a_view_only_user_deletes_nothing(seeded, url):
    client = client_for(make_user("viewer", *VIEW_PERMS))
    selected = a_row_of(url, seeded)
    model = client.get(url).context["cl"].model
    client.post(url, action_post(url, "delete_selected", selected))
    assert model.objects.filter(pk=selected).exists()


def test_live_jobs_cannot_be_deleted_with_djangos_delete_selected_even_by_a_superuser(seeded):
    client = client_for(make_user("root", superuser=True))
    job = seeded.pending[0]
    assert client.post(JOBS, action_post(JOBS, "delete_selected", job)).status_code == 403
    assert client.get(f"{JOBS}{job}/change/").status_code == 200


def test_djangos_delete_selected_runs_for_a_user_with_the_delete_permission(seeded):
    client = client_for(make_user("janitor", *VIEW_PERMS, "delete_worker"))
    worker = add_worker("host:gone", stale=True)
    response = client.post(WORKERS, action_post(WORKERS, "delete_selected", worker.pk))
    assert response.status_code == 302
    assert not Worker.objects.filter(pk=worker.pk).exists()


def test_an_action_no_page_offers_gets_djangos_no_action_selected(seeded):
    client = client_for(make_user("root", superuser=True))
    response = client.post(CONSUMERS, action_post(CONSUMERS, "no_such_action", 1), follow=True)
    assert response.status_code == 200
    assert "No action selected." in response.content.decode()


@needs_detail_page_actions
def test_a_detail_page_action_posted_by_a_view_only_user_is_refused_with_403(seeded):
    client = client_for(make_user("viewer", *VIEW_PERMS))
    job = seeded.pending[0]
    data = {"CHANGE_FORM-action": "cancel", "_selected_action": job, "confirm": "yes"}
    assert client.post(f"{JOBS}{job}/change/", data).status_code == 403


def test_an_action_needs_its_own_permission(seeded):
    client = client_for(make_user("requeuer", *VIEW_PERMS, "requeue_deadletter"))
    job = seeded.pending[0]
    data = {"action": "cancel", "_selected_action": [job], "confirm": "yes"}
    assert client.post(JOBS, data).status_code == 403
    assert 'value="requeue"' in client.get(DEAD).content.decode()


def test_actions_need_the_csrf_token(seeded):
    client = client_for(make_user("root", superuser=True), enforce_csrf_checks=True)
    data = {"action": "requeue", "_selected_action": [DeadLetter.objects.first().pk]}
    assert client.post(DEAD, data).status_code == 403
    assert DeadLetter.objects.count() == 2


def test_actions_are_post_only(seeded):
    client = client_for(make_user("root", superuser=True))
    response = client.get(DEAD, {"action": "requeue", "_selected_action": seeded.dead[0]})
    assert response.status_code in (200, 302)
    assert DeadLetter.objects.count() == 2


def test_live_jobs_cannot_be_added_edited_or_deleted_as_rows(seeded):
    client = client_for(make_user("root", superuser=True))
    job = seeded.pending[0]
    assert client.get(f"{JOBS}add/").status_code == 403
    response = client.post(f"{JOBS}{job}/change/", {"priority": 9, "_save": "Save"})
    assert response.status_code == 403
    assert client.post(f"{JOBS}{job}/delete/", {"post": "yes"}).status_code == 403


def test_the_job_detail_page_shows_the_payload_as_pretty_json(seeded):
    client = client_for(make_user("root", superuser=True))
    html = client.get(f"{JOBS}{seeded.pending[0]}/change/").content.decode()
    assert "{\n  &quot;to&quot;: &quot;p0@example.com&quot;\n}" in html
    assert "Save" not in html


def test_the_dead_letter_detail_page_shows_the_full_error(seeded):
    client = client_for(make_user("root", superuser=True))
    dead = DeadLetter.objects.first()
    html = client.get(f"{DEAD}{dead.pk}/change/").content.decode()
    assert "Traceback (most recent call last): ..." in html
    assert "https://example.com/" in html


def test_job_states_are_shown_and_filtered(seeded):
    client = client_for(make_user("root", superuser=True))
    for state, ids in [
        ("pending", seeded.pending),
        ("scheduled", seeded.scheduled),
        ("claimed", seeded.claimed),
    ]:
        response = client.get(JOBS, {"state": state})
        shown = {row.pk for row in response.context["cl"].result_list}
        assert shown == set(ids), state
        assert f"alk-{state}" in response.content.decode()


def test_jobs_are_found_by_id_and_by_unique_key(seeded):
    from django_alkqueue import queue

    keyed = queue("shop-emails").enqueue({"k": 1}, unique_key="order-42")
    client = client_for(make_user("root", superuser=True))
    by_key = client.get(JOBS, {"q": "order-42"}).context["cl"].result_list
    by_id = client.get(JOBS, {"q": str(seeded.pending[1])}).context["cl"].result_list
    assert [j.pk for j in by_key] == [keyed.id]
    assert [j.pk for j in by_id] == [seeded.pending[1]]


def test_stale_workers_are_marked(seeded):
    add_worker("host:live")
    add_worker("host:gone", stale=True)
    client = client_for(make_user("root", superuser=True))
    html = client.get(WORKERS).content.decode()
    assert html.count("alk-state alk-stale") == 1
    stale = client.get(WORKERS, {"heartbeat": "stale"}).context["cl"].result_list
    assert [w.worker_id for w in stale] == ["host:gone"]


def test_the_consumer_list_shows_live_counts(seeded):
    client = client_for(make_user("root", superuser=True))
    rows = {c.queue: c for c in client.get(CONSUMERS).context["cl"].result_list}
    emails, webhooks = rows["shop-emails"], rows["shop-webhooks"]
    assert (emails.pending, emails.scheduled, emails.claimed, emails.dead) == (3, 1, 2, 0)
    assert (webhooks.pending, webhooks.dead, webhooks.paused) == (0, 2, True)


def test_an_unknown_queue_detail_is_a_404(seeded):
    client = client_for(make_user("root", superuser=True))
    assert client.get(queue_url("nope")).status_code == 404


@pytest.mark.parametrize("param", ["q", "id__exact", "id__in", "id__gt"])
def test_an_id_past_64_bits_is_no_server_error_and_lists_nothing(seeded, param):
    client = client_for(make_user("root", superuser=True))
    response = client.get(JOBS, {param: str(10**23)})
    assert response.status_code in (200, 302)
    if response.status_code == 200:
        assert response.context["cl"].result_count == 0


def test_an_unknown_filter_value_lists_nothing_rather_than_everything(seeded):
    client = client_for(make_user("root", superuser=True))
    add_worker("host:1")
    assert client.get(JOBS, {"state": "' OR 1=1 --"}).context["cl"].result_count == 0
    assert client.get(WORKERS, {"heartbeat": "x"}).context["cl"].result_count == 0
    assert client.get(DEAD, {"q": "not-an-id"}).context["cl"].result_count == 0
