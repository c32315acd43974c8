"""Scenario 9, admin security (PostgreSQL and SQLite), over every page and every action the
alkqueue admin registers:

- anonymous users, active non-staff users (even holding every permission) and staff without
  permissions: no page shows queue data, no action, edit, add or delete changes a row;
- CSRF: every action and every form POST without a valid token is refused, nothing changes;
- stored XSS: queue names, payloads, errors, worker ids, hostnames, handler paths, unique keys
  and reasons holding HTML/JS (written straight through the ORM, since queue names and worker
  ids are validated on the way in) come out escaped on every page, confirmation pages
  included; query parameters reflected into a page are escaped too;
- SQL injection: the classic payloads in every filter, search, ordering and paging parameter
  neither fail, nor widen a result, nor change a row, nor stall.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db.models import Model
from django.test import Client
from django.urls import reverse

from django_alkqueue.models import QueueMessage

from .admin_inventory import (
    APP,
    ATTRIBUTE,
    QUEUE,
    RAW,
    SCRIPT,
    SECRET,
    action_posts,
    changelist,
    client_as,
    page_urls,
    registered,
    seed,
    snapshot,
)
from .invariants import Figures, Report
from .record import Stopwatch, record
from .scale import pick

pytestmark = pytest.mark.django_db
if not admin.site.is_registered(QueueMessage):
    pytestmark = [pytestmark, pytest.mark.skip(reason="admin not built yet")]

SQL_CLASSICS = [
    "' OR '1'='1",
    "' OR 1=1 --",
    '" OR ""="',
    "1 OR 1=1",
    "1; DROP TABLE alkqueue_message; --",
    "'; DELETE FROM alkqueue_deadletter; --",
    "' UNION SELECT NULL, NULL, NULL --",
    "1' AND pg_sleep(5) IS NULL --",
    "'||(SELECT pg_sleep(5))||'",
    "%",
    "_",
    "\\",
    "-1",
    "99999999999999999999999",
    "é'😀",
]
#: The short version (make test) tries these six; the long one all of them.
SQL_ATTACKS = pick(
    short=[SQL_CLASSICS[i] for i in (0, 4, 6, 8, 9, 13)],
    long=SQL_CLASSICS,
)
HARMLESS = "zzz-no-such-value"
TALLY = {"requests": 0, "refused": 0}


@pytest.fixture
def rows() -> dict[str, Model]:
    return seed()


def body(response: Any) -> str:
    TALLY["requests"] += 1
    return response.content.decode(errors="replace")


# -- who may see and do nothing --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["anonymous", "non-staff", "staff-without-permissions"])
def test_no_page_shows_queue_data_to_users_without_permission(rows, kind: str):
    client = client_as(kind)
    for url in page_urls(rows):
        response = client.get(url)
        text = body(response)
        assert SECRET not in text and "alk-xss" not in text, f"{kind} sees data at {url}"
        if kind == "staff-without-permissions" and url == reverse("admin:index"):
            assert response.status_code == 200 and f"/{APP}/" not in text
            continue
        expected = (403, 404) if kind.startswith("staff") else (302,)
        assert response.status_code in expected, f"{kind} GET {url}: {response.status_code}"
        TALLY["refused"] += 1
        if response.status_code == 302:
            assert response["Location"].startswith(reverse("admin:login")), url


@pytest.mark.parametrize(
    "kind", ["anonymous", "non-staff", "staff-without-permissions", "staff-with-view-only"]
)
def test_no_action_or_form_changes_a_row_for_users_without_permission(rows, kind: str):
    client = client_as("staff-without-permissions" if kind == "staff-with-view-only" else kind)
    if kind == "staff-with-view-only":
        viewer = User.objects.get(username="staff-without-permissions")
        viewer.user_permissions.set(
            Permission.objects.filter(content_type__app_label=APP, codename__startswith="view_")
        )
    before = snapshot()
    for url, data in action_posts(rows):
        response = client.post(url, data)
        text = body(response)
        assert response.status_code in (302, 403, 404, 200), f"{kind} POST {url} {data}"
        assert snapshot() == before, f"{kind} changed rows with POST {url} {data}"
        if kind != "staff-with-view-only":
            assert SECRET not in text, f"{kind} POST {url} shows data"
        TALLY["refused"] += 1


def test_every_action_and_form_needs_the_csrf_token(rows):
    client = client_as("superuser", enforce_csrf_checks=True)
    before = snapshot()
    for url, data in action_posts(rows):
        for token in (None, "forged-token-" + "x" * 51):
            payload = data if token is None else {**data, "csrfmiddlewaretoken": token}
            response = client.post(url, payload)
            body(response)
            assert response.status_code == 403, f"POST {url} {payload}: {response.status_code}"
            TALLY["refused"] += 1
    assert snapshot() == before


# -- what comes out escaped ------------------------------------------------------------------


def assert_escaped(text: str, where: str) -> None:
    for raw in RAW:
        assert raw not in text, f"unescaped {raw!r} in {where}"


def test_html_in_stored_fields_is_escaped_on_every_page(rows):
    client = client_as("superuser")
    for url in page_urls(rows):
        response = client.get(url)
        assert response.status_code in (200, 302, 403, 404), f"GET {url}: {response.status_code}"
        assert_escaped(body(response), url)


def test_html_in_stored_fields_is_escaped_on_every_confirmation_page(rows):
    client = client_as("superuser")
    for url, data in action_posts(rows):
        unconfirmed = {k: v for k, v in data.items() if k not in ("confirm", "post", "priority")}
        response = client.post(url, unconfirmed)
        assert response.status_code in (200, 302, 403, 404), f"POST {url}: {response.status_code}"
        assert_escaped(body(response), f"POST {url} {unconfirmed}")


def test_query_parameters_reflected_into_pages_are_escaped(rows):
    client = client_as("superuser")
    hostile = {"q": SCRIPT, SCRIPT: ATTRIBUTE, "queue": QUEUE, "refresh": ATTRIBUTE}
    for name, _ in registered():
        url = f"{changelist(name)}?{urlencode(hostile)}"
        assert_escaped(body(client.get(url)), url)
        response = client.post(
            url,
            {
                "action": "delete_selected" if name == "deadletter" else "cancel",
                "select_across": 1,
                "index": 0,
                "_selected_action": [0],
            },
        )
        assert_escaped(body(response), f"confirmation of {url}")
    queue_page = reverse(f"admin:{APP}_queuestat_queue", args=[SCRIPT.replace("/", "")])
    assert_escaped(body(client.get(queue_page)), queue_page)
    assert_escaped(
        body(client.get(f"/admin/{APP}/queuestat/queue/{quote(SCRIPT, safe='')}/")),
        "queue page with a slash in its name",
    )


# -- what filters cannot do ------------------------------------------------------------------


def filter_params(name: str) -> list[str]:
    """Every query parameter the changelist reads: its filters, search, ordering, paging."""
    model_admin = dict(registered())[name]
    params = ["q", "o", "p", "e", "_changelist_filters", "all", "id__exact", "id__in"]
    for spec in model_admin.list_filter:
        if isinstance(spec, str):
            params += [f"{spec}__exact", spec]
        elif isinstance(spec, tuple):
            params += [f"{spec[0]}__gte", f"{spec[0]}__lt", f"{spec[0]}__isnull"]
        else:
            params.append(spec.parameter_name)
    return params


def listed(client: Client, url: str) -> tuple[int, int | None]:
    """(status, rows listed); rows is None where the page has no changelist."""
    response = client.get(url)
    text = body(response)
    assert response.status_code in (200, 302, 400, 404), f"{url}: {response.status_code}"
    assert_escaped(text, url)
    if response.status_code == 200 and "cl" in response.context:
        return 200, response.context["cl"].result_count
    return response.status_code, None


#: The changelists, one test each (so that a parallel run spreads them over its processes).
CHANGELISTS = [name for name, _ in registered()]


@pytest.mark.parametrize("name", CHANGELISTS)
def test_classic_sql_injections_in_filters_and_search_neither_fail_widen_nor_write(rows, name):
    """Each attack must list no more than a harmless value that matches nothing: either no
    row (the value was compared as data), or what the harmless value lists (a filter that
    ignores values it does not know)."""
    client = client_as("superuser")
    before = snapshot()
    slowest = 0.0
    for param in filter_params(name):
        _, baseline = listed(client, f"{changelist(name)}?{urlencode({param: HARMLESS})}")
        for attack in SQL_ATTACKS:
            url = f"{changelist(name)}?{urlencode({param: attack})}"
            started = time.monotonic()
            _, count = listed(client, url)
            slowest = max(slowest, time.monotonic() - started)
            if count is not None and param not in ("p", "o", "e"):
                assert count in (0, baseline), f"{url} lists {count}, {HARMLESS!r} {baseline}"
    assert snapshot() == before
    assert slowest < 4, f"a request took {slowest:.1f}s: an injected sleep ran?"


def test_every_changelist_of_the_app_is_attacked():
    """The list was read when the tests were collected: the admin had every model then."""
    assert CHANGELISTS and [name for name, _ in registered()] == CHANGELISTS


@pytest.mark.parametrize("param", ["q", "id__exact", "id__gt", "id__in"])
def test_ids_beyond_64_bits_in_the_job_changelist_url_are_not_a_server_error(rows, param: str):
    client = client_as("superuser")
    status, count = listed(client, f"{changelist('queuemessage')}?{param}={10**23}")
    assert status in (200, 302, 400, 404) and count in (0, None)


@pytest.fixture(scope="module", autouse=True)
def figures(request: pytest.FixtureRequest) -> Iterator[None]:
    failed_before = request.session.testsfailed
    clock = Stopwatch()
    yield
    failures = request.session.testsfailed - failed_before
    report = Report(
        Figures(jobs=TALLY["requests"], faults=TALLY["refused"]),
        [f"{failures} admin security test(s) failed"] if failures else [],
    )
    if TALLY["requests"]:
        record(
            9,
            "Admin security",
            "every admin page and action as anonymous, non-staff and permission-less staff; "
            "CSRF on every POST; HTML/JS in every stored text field and reflected parameter; "
            f"{len(SQL_ATTACKS)} SQL-injection classics in every filter, search, ordering "
            "and paging parameter",
            report,
            clock.seconds(),
            dict(TALLY),
        )
