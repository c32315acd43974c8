"""Flow control in the admin: the consumer's "Set limits" and "Reset limits to code" actions
(their own permission, logged), the limits in force and where each comes from, claimed vs
concurrency, throttled and the busiest keys on the overview and the queue page, and the job
list's concurrency_key column and filter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.admin.compat import DETAIL_PAGE_ACTIONS
from django_alkqueue.models import Consumer
from tests.admin_helpers import (
    CONSUMERS,
    JOBS,
    OVERVIEW,
    VIEW_PERMS,
    client_for,
    make_user,
    queue_url,
)

pytestmark = pytest.mark.django_db

#: No @consumer in this process: its code limits are the row's, as a worker wrote them.
API = "api-calls"


def api_consumer(overrides: dict | None = None, **code: object) -> Consumer:
    code = code or {"concurrency": 8, "rate": [100, 1.0]}
    return Consumer.objects.create(
        queue=API,
        handler="app.consumers.call_api",
        lease=30,
        max_attempts=3,
        code_limits=code,
        limit_overrides=overrides or {},
    )


def post_action(client, action, ids, url=CONSUMERS, **extra):
    return client.post(url, {"action": action, "_selected_action": ids, "index": 0, **extra})


def set_limits(client, consumer, **fields):
    """Set limits, confirmed, with the form as shown but for `fields`."""
    shown = {"concurrency": "8", "key_concurrency": "", "rate": "100/s", "key_rate": ""}
    return post_action(client, "set_limits", [consumer.pk], confirm="yes", **(shown | fields))


def overrides_of(consumer: Consumer) -> dict:
    consumer.refresh_from_db()
    return consumer.limit_overrides


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def limit_rows(html: str) -> dict[str, tuple[str, str]]:
    """The consumer page's limits table: limit -> (value, source)."""
    import re

    rows = re.findall(
        r'<tr data-limit="(\w+)"><th>\w+</th><td>([^<]*)</td><td[^>]*>([^<]*)</td></tr>', html
    )
    return {name: (value, source) for name, value, source in rows}


# -- the consumer page ---------------------------------------------------------------------


def test_the_consumer_page_shows_each_limit_in_force_and_where_it_comes_from(root):
    consumer = api_consumer(overrides={"key_concurrency": 2, "rate": None})
    html = root.get(f"{CONSUMERS}{consumer.pk}/change/").content.decode()
    assert limit_rows(html) == {
        "concurrency": ("8", "code"),
        "key_concurrency": ("2", "override"),
        "rate": ("no limit", "override"),
        "key_rate": ("no limit", "-"),
    }


def test_the_consumer_page_shows_limits_from_the_settings(root, settings):
    settings.ALKQUEUE = {"QUEUES": {"reports": {"concurrency": 2, "rate": "10/m"}}}
    consumer = Consumer.objects.create(queue="reports", handler="app.f", lease=30, max_attempts=3)
    html = root.get(f"{CONSUMERS}{consumer.pk}/change/").content.decode()
    assert limit_rows(html)["concurrency"] == ("2", "settings")
    assert limit_rows(html)["rate"] == ("10/m", "settings")


def test_the_consumer_list_sums_up_the_limits_and_their_sources(root):
    api_consumer(overrides={"concurrency": 3})
    html = root.get(CONSUMERS).content.decode()
    assert "concurrency=3 (override), rate=100/s (code)" in html


# -- a stored limit that does not parse --------------------------------------------------------

#: Limits a Consumer row may hold when written by hand: numbers past what int() prints or
#: float() holds, and shapes that are no limit at all. JSON holds each (no NaN: jsonb
#: refuses it).
UNPARSABLE = [
    {"rate": "9" * 5000 + "/s"},
    {"rate": [5, 10**400]},
    {"key_rate": [10**400, 5]},
    {"concurrency": 10**400},
    {"concurrency": {"a": 1}},
]


@pytest.mark.parametrize("stored", UNPARSABLE)
@pytest.mark.parametrize("column", ["code_limits", "limit_overrides"])
def test_a_stored_limit_that_does_not_parse_is_shown_as_ignored_on_the_consumer_page(
    root, column, stored
):
    consumer = api_consumer()
    Consumer.objects.filter(pk=consumer.pk).update(**{column: stored})

    response = root.get(f"{CONSUMERS}{consumer.pk}/change/")

    assert response.status_code == 200
    (name,) = stored
    html = response.content.decode()
    assert f'<tr class="alk-ignored" data-ignored="{name}">' in html
    assert "not a valid limit, ignored" in html


@pytest.mark.parametrize("stored", UNPARSABLE)
def test_the_consumer_list_overview_and_queue_page_answer_with_a_stored_limit_that_does_not_parse(
    root, stored
):
    busy_api_queue()
    Consumer.objects.filter(queue=API).update(limit_overrides=stored)

    for url in (CONSUMERS, OVERVIEW, queue_url(API)):
        assert root.get(url).status_code == 200, url
    assert "not a valid limit, ignored" in root.get(CONSUMERS).content.decode()


def test_an_ignored_override_leaves_the_codes_limit_in_force(root):
    consumer = api_consumer(overrides={"concurrency": 10**400, "rate": None})
    html = root.get(f"{CONSUMERS}{consumer.pk}/change/").content.decode()
    assert limit_rows(html)["concurrency"] == ("8", "code")
    assert limit_rows(html)["rate"] == ("no limit", "override")


def test_set_limits_replaces_a_stored_limit_that_does_not_parse(root):
    consumer = api_consumer(overrides={"rate": [5, 10**400]})
    set_limits(root, consumer, rate="10/s")
    assert overrides_of(consumer) == {"rate": [10, 1.0]}


# -- Set limits ------------------------------------------------------------------------------


def test_set_limits_opens_a_form_showing_the_limits_in_force(root):
    consumer = api_consumer()
    response = post_action(root, "set_limits", [consumer.pk])
    assert response.status_code == 200
    form = response.context["form"]
    assert {name: form[name].value() for name in form.fields} == {
        "concurrency": "8", "key_concurrency": "", "rate": "100/s", "key_rate": "",
    }  # fmt: skip
    assert overrides_of(consumer) == {}


def test_set_limits_overrides_only_the_limits_changed_in_the_form(root):
    consumer = api_consumer()
    response = set_limits(root, consumer, concurrency="3", key_rate="5/m")
    assert response.status_code == 302
    assert overrides_of(consumer) == {"concurrency": 3, "key_rate": [5, 60.0]}
    assert "Limits of 1 queue: concurrency=3, key_rate=5/m." in messages_of(response)


def test_an_emptied_field_is_the_override_no_limit(root):
    consumer = api_consumer()
    set_limits(root, consumer, rate="")
    assert overrides_of(consumer) == {"rate": None}
    html = root.get(f"{CONSUMERS}{consumer.pk}/change/").content.decode()
    assert limit_rows(html)["rate"] == ("no limit", "override")


@pytest.mark.parametrize(
    "field, value",
    [("concurrency", "0"), ("concurrency", "100001"), ("concurrency", "eight"),
     ("key_concurrency", "-1"), ("rate", "10/d"), ("key_rate", "0/s")],
)  # fmt: skip
def test_a_bad_limit_shows_the_form_again_and_writes_nothing(root, field, value):
    consumer = api_consumer()
    response = set_limits(root, consumer, **{field: value})
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert overrides_of(consumer) == {}
    assert not LogEntry.objects.exists()


def test_set_limits_is_logged_with_the_queue_and_the_limits(root):
    consumer = api_consumer()
    set_limits(root, consumer, concurrency="3", rate="")
    entry = LogEntry.objects.get()
    assert entry.action_flag == CHANGE
    assert entry.object_id == str(consumer.pk)
    assert entry.change_message == (
        f"set limits: 1 consumer; ids {consumer.pk}. queues {API}: concurrency=3, rate=no limit"
    )


def test_an_override_wins_over_the_code_the_worker_writes_again(root):
    consumer = api_consumer()
    set_limits(root, consumer, concurrency="2")
    # a worker restarting writes its code's limits again; the override stays
    Consumer.objects.filter(pk=consumer.pk).update(code_limits={"concurrency": 16})
    html = root.get(f"{CONSUMERS}{consumer.pk}/change/").content.decode()
    assert limit_rows(html)["concurrency"] == ("2", "override")


def test_reset_limits_to_code_drops_the_overrides_and_is_logged(root):
    consumer = api_consumer(overrides={"concurrency": 2, "rate": None})
    response = post_action(root, "reset_limits", [consumer.pk])
    assert response.status_code == 302
    assert overrides_of(consumer) == {}
    html = root.get(f"{CONSUMERS}{consumer.pk}/change/").content.decode()
    assert limit_rows(html)["concurrency"] == ("8", "code")
    assert LogEntry.objects.get().change_message == (
        f"reset limits: 1 consumer; ids {consumer.pk}. queues {API}"
    )


@pytest.mark.skipif(not DETAIL_PAGE_ACTIONS, reason="detail-page actions need Django 6.1")
def test_set_limits_runs_from_the_consumer_page(root):
    consumer = api_consumer()
    fields = {"concurrency": "4", "key_concurrency": "", "rate": "100/s", "key_rate": ""}
    response = root.post(
        f"{CONSUMERS}{consumer.pk}/change/",
        {"CHANGE_FORM-action": "set_limits", "_selected_action": consumer.pk, "confirm": "yes",
         **fields},
    )  # fmt: skip
    assert response.status_code == 302
    assert overrides_of(consumer) == {"concurrency": 4}


# -- the permission ----------------------------------------------------------------------------


def test_set_limits_consumer_is_its_own_permission():
    staff = make_user("pauser", *VIEW_PERMS, "pause_consumer", "resume_consumer")
    limiter = make_user("limiter", *VIEW_PERMS, "set_limits_consumer")
    assert not staff.has_perm("django_alkqueue.set_limits_consumer")
    assert limiter.has_perm("django_alkqueue.set_limits_consumer")


@pytest.mark.parametrize("action", ["set_limits", "reset_limits"])
def test_a_staff_user_without_set_limits_consumer_neither_sees_nor_runs_the_action(action):
    consumer = api_consumer(overrides={"concurrency": 2})
    client = client_for(make_user("pauser", *VIEW_PERMS, "pause_consumer"))
    page = client.get(CONSUMERS)
    offered = [name for name, _ in page.context["action_form"].fields["action"].choices]
    assert "pause" in offered and action not in offered
    assert action not in client.get(f"{CONSUMERS}{consumer.pk}/change/").content.decode()
    response = post_action(client, action, [consumer.pk], confirm="yes", concurrency="9")
    assert response.status_code == 403
    assert overrides_of(consumer) == {"concurrency": 2}
    assert not LogEntry.objects.exists()


def test_a_user_with_set_limits_consumer_runs_the_action():
    consumer = api_consumer()
    client = client_for(make_user("limiter", *VIEW_PERMS, "set_limits_consumer"))
    assert set_limits(client, consumer, concurrency="5").status_code == 302
    assert overrides_of(consumer) == {"concurrency": 5}


# -- the queue page and the overview ---------------------------------------------------------


def busy_api_queue() -> None:
    """api-calls with concurrency 8 (code), key_concurrency 1 (override): customer:1 runs one
    job and holds back two, customer:2 runs one and holds back none, an unkeyed job waits."""
    api_consumer(overrides={"key_concurrency": 1})
    q = queue(API)
    q.enqueue_many([{}] * 3, concurrency_key="customer:1")
    q.enqueue({}, concurrency_key="customer:2")
    q.enqueue({})
    handed = q.claim("w", 2)
    assert sorted(h.job.concurrency_key for h in handed) == ["customer:1", "customer:2"]


def test_the_queue_page_shows_the_flow_of_a_limited_queue(root):
    busy_api_queue()
    response = root.get(queue_url(API))
    flow = response.context["flow"]
    assert (flow.claimed, flow.concurrency, flow.throttled) == (2, 8, 2)
    assert [(k.key, k.running, k.pending) for k in flow.busiest_keys] == [
        ("customer:1", 1, 2), ("customer:2", 1, 0),
    ]  # fmt: skip
    html = response.content.decode()
    assert limit_rows(html)["key_concurrency"] == ("1", "override")
    assert 'data-figure="throttled" class="alk-warn">2<' in html
    assert f"{JOBS}?queue={API}&amp;concurrency_key=customer%3A1" in html


def test_the_queue_page_of_an_unlimited_queue_has_no_flow_section(root):
    queue("plain").enqueue({}, concurrency_key="k")
    response = root.get(queue_url("plain"))
    assert response.context["flow"] is None
    assert 'id="alk-flow"' not in response.content.decode()


def test_the_overview_lists_the_flow_of_the_limited_queues(root):
    busy_api_queue()
    queue("plain").enqueue({})
    response = root.get(OVERVIEW)
    (flow,) = response.context["flows"]
    assert (flow.queue, flow.claimed, flow.throttled) == (API, 2, 2)
    html = response.content.decode()
    assert 'data-limit="concurrency">concurrency=8 (code)' in html
    assert 'data-limit="key_concurrency">key_concurrency=1 (override)' in html


# -- the job list ----------------------------------------------------------------------------


def keyed_jobs() -> dict[str, list[int]]:
    q = queue(API)
    return {
        "customer:1": [j.id for j in q.enqueue_many([{}] * 2, concurrency_key="customer:1")],
        "customer:2": [q.enqueue({}, concurrency_key="customer:2").id],
        "none": [q.enqueue({}).id],
    }


def listed(client, url) -> set[int]:
    response = client.get(url)
    assert response.status_code == 200, url
    return {job.id for job in response.context["cl"].result_list}


def test_the_job_list_shows_the_concurrency_key(root):
    keyed_jobs()
    html = root.get(JOBS).content.decode()
    assert '<div class="alk-sub" title="concurrency key">customer:2</div>' in html


@pytest.mark.parametrize("parameter", ["concurrency_key", "concurrency_key__exact"])
def test_the_job_list_filters_by_concurrency_key_exactly(root, parameter):
    jobs = keyed_jobs()
    assert listed(root, f"{JOBS}?queue={API}&{parameter}=customer:1") == set(jobs["customer:1"])
    assert listed(root, f"{JOBS}?{parameter}=customer:2") == set(jobs["customer:2"])
    assert listed(root, f"{JOBS}?{parameter}=customer") == set()


@pytest.mark.parametrize("lookup", ["concurrency_key__startswith", "concurrency_key__icontains",
                                    "concurrency_key__isnull", "concurrency_key__in"])  # fmt: skip
def test_the_job_list_refuses_any_other_lookup_on_concurrency_key(root, lookup):
    keyed_jobs()
    response = root.get(f"{JOBS}?{lookup}=customer")
    assert response.status_code == 302 and response.url.endswith("?e=1")


def test_the_job_page_shows_the_concurrency_key(root):
    job_id = keyed_jobs()["customer:2"][0]
    html = root.get(f"{JOBS}{job_id}/change/").content.decode()
    assert "field-concurrency_key" in html and "customer:2" in html


# -- cost ------------------------------------------------------------------------------------


def test_the_queue_page_of_a_limited_queue_costs_a_bounded_number_of_queries(root):
    busy_api_queue()
    root.get(queue_url(API))
    with CaptureQueriesContext(connection) as few:
        root.get(queue_url(API))
    queue(API).enqueue_many([{}] * 30, concurrency_key="customer:9")
    queue(API).enqueue_many([{"i": i} for i in range(30)],
                            concurrency_key=lambda p: f"c:{p['i']}")  # fmt: skip
    with CaptureQueriesContext(connection) as many:
        root.get(queue_url(API))
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_run_at_of_a_scheduled_keyed_job_keeps_it_out_of_the_busiest_keys(root):
    api_consumer(overrides={"key_concurrency": 1})
    queue(API).enqueue({}, concurrency_key="later", run_at=timezone.now() + timedelta(hours=1))
    assert root.get(queue_url(API)).context["flow"].busiest_keys == []


@pytest.mark.parametrize("action", ["set_limits", "reset_limits"])
def test_a_queue_name_written_outside_the_api_is_named_and_left_unchanged(root, action):
    bad = Consumer.objects.create(queue="bad name!", handler="app.f", lease=30, max_attempts=3)
    response = post_action(root, action, [bad.pk], confirm="yes", concurrency="2")
    assert response.status_code == 302
    assert any("Limits left unchanged for bad name!" in m for m in messages_of(response))
    assert overrides_of(bad) == {}
    assert not LogEntry.objects.exists()
