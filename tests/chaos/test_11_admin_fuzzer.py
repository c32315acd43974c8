"""Scenario 11, the admin fuzzer (PostgreSQL and SQLite): every page the alkqueue admin
registers, GET with random query strings (the declared filters, random field lookups, ids in
every spelling int() accepts, date hierarchy years, months and days and date bounds at and
past datetime's ends, numbers past a C long, NULs, terminal escape codes, hostile text) and
POST with random action bodies, as anonymous, staff without permissions, view-only staff and
a superuser. The rows include what issue 48's probe wrote: a job in the history, a Consumer
row whose stored limits do not parse, control characters in a worker's id.

For every request: no server error; no response over PAGE_BYTES_MAX (docs/security.md,
"Sizes"); for everyone but the superuser, no row of the queue tables changed (a hash of
every table before and after) and no payload of a sensitive queue shown.

The requests come from a seeded random generator: a failure names the seed, the user, the
method, the URL and the body, and ALKQUEUE_FUZZ_SEED=<seed> replays the run. `make test`
sends a bounded number per user; `make chaos` (CHAOS_LONG=1) many more, from a fresh seed.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission, User
from django.db.models import Model
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from django_alkqueue.models import Consumer, DeadLetter, FinishedJob, QueueMessage
from tests.admin_helpers import PAGE_BYTES_MAX

from .admin_inventory import (
    APP,
    QUEUE,
    SCRIPT,
    changelist,
    page_urls,
    registered,
    seed,
    snapshot,
)
from .scale import LONG, pick

pytestmark = pytest.mark.django_db

KINDS = ["anonymous", "staff-without-permissions", "staff-with-view-only", "superuser"]
REQUESTS = pick(short=120, long=3_000)
SEED = int(os.environ.get("ALKQUEUE_FUZZ_SEED") or (time.time_ns() if LONG else 11))

PRIVATE_QUEUE = "fuzz-private"
PRIVATE = "alk-private-4111-1111"  # in a sensitive queue's payloads: only superusers see it
SENSITIVE = override_settings(ALKQUEUE={"QUEUES": {PRIVATE_QUEUE: {"sensitive": True}}})

FIELDS = [
    "id", "pk", "queue", "payload", "priority", "attempts", "last_error", "unique_key",
    "claim_token", "claimed_by", "run_at", "died_at", "reason", "job_id", "handler", "paused",
    "worker_id", "hostname", "queues", "retry_policy", "minute", "nope", "queue__id",
    "finished_at", "outcome", "output", "concurrency_key",
]  # fmt: skip
LOOKUPS = [
    "", "exact", "iexact", "in", "gt", "lt", "gte", "lte", "contains", "icontains", "regex",
    "iregex", "startswith", "isnull", "range", "year", "date", "has_key", "contains__0",
    "len", "keys", "0", "nope",
]  # fmt: skip
#: The finished jobs' date hierarchy and date bounds (admin/date_params.py).
DATE_PARAMS = [
    "finished_at__year", "finished_at__month", "finished_at__day", "finished_at__gte",
    "finished_at__lt", "outcome", "batch",
]  # fmt: skip
#: What the date parameters get besides VALUES: years at and past datetime's ends, 20-digit,
#: negative and other-script numbers, bounds at datetime's ends.
DATE_VALUES = [
    "9999", "9998", "10000", "0", "1", "2", "-1", "-2031", "99999999999999999999", "+2031",
    " 2031", "2_031", "٢٠٣١", "2031.0", "12", "13", "31", "32", "0001-01-01", "9999-12-31",
    "9999-12-31 23:59:59.999999", "10000-01-01", "2031-02-30",
]  # fmt: skip
PARAMS = [
    "q", "p", "o", "e", "all", "_changelist_filters", "_to_field", "_popup", "queue", "state",
    "reason", "heartbeat", "died_at__gte", "died_at__lt", "died_at__isnull", "refresh",
    *DATE_PARAMS,
]  # fmt: skip
VALUES = [
    "", "0", "1", "-1", "+1", "1_000", "99999999999999999999", "+99999999999999999999",
    "1_000_000_000_000_000_000_000", str(2**63), str(-(2**63) - 1), "1,2,3", "1,,2", ",",
    "١٢٣", "1e9", "0x10", "nan", "inf", "True", "null", "^(a+)+$", "\\", "(", "[", "%", "_",
    "'", '"', "' OR 1=1 --", "\x00", "a\x00b", "é😀", SCRIPT, QUEUE, PRIVATE_QUEUE,
    "shop-emails", "pending", "claimed", "2030-01-01", "2030-13-45", "2030-01-01 00:00+00:00",
    "x" * 5_000, "-id", "0.1", "1.2.3", "-", "p", "q=1&p=2",
    *DATE_VALUES, "9" * 5_000, "9" * 5_000 + "/s", "1e400", "\x1b[2J", "\x1b]0;t\x07", "a\nb",
    "\u202e", "\x9b",
]  # fmt: skip
ACTIONS = [
    "cancel", "run_now", "change_priority", "requeue", "delete_selected", "pause", "resume",
    "nope", "",
]  # fmt: skip


# -- the users, the rows, the state ----------------------------------------------------------


def client_for_kind(kind: str) -> Client:
    client = Client(raise_request_exception=False)
    if kind == "anonymous":
        return client
    if kind == "superuser":
        client.force_login(User.objects.create_superuser("fuzz-root", "r@example.com", "pw"))
        return client
    user = User.objects.create_user(f"fuzz-{kind}", f"{kind}@example.com", "pw", is_staff=True)
    if kind == "staff-with-view-only":
        views = Permission.objects.filter(content_type__app_label=APP, codename__startswith="view_")
        user.user_permissions.set(views.exclude(codename="view_payload"))
    client.force_login(user)
    return client


def seed_rows() -> dict[str, Model]:
    rows = seed()
    now = timezone.now()
    stamps = {"max_attempts": 3, "backoff_base": 1.0, "lease": 30.0, "run_at": now}
    QueueMessage.objects.create(
        queue=PRIVATE_QUEUE, payload={"card": PRIVATE}, enqueued_at=now, **stamps
    )
    DeadLetter.objects.create(
        job_id=20_000, queue=PRIVATE_QUEUE, payload={"card": PRIVATE}, attempts=3,
        enqueued_at=now, died_at=now, reason="failed", last_error="ValueError", **stamps,
    )  # fmt: skip
    FinishedJob.objects.create(
        job_id=30_000, queue=QUEUE, payload={"n": "\x1b[2J"}, output={"s": "a\x00b"},
        output_error=None, attempts=1, concurrency_key="\x1b]0;t\x07", enqueued_at=now,
        started_at=now, finished_at=now, duration=0.5, worker_id="w\nfake", outcome="succeeded",
        delete_after=now + timedelta(days=1), max_attempts=3, backoff_base=1.0, lease=30.0,
    )  # fmt: skip
    Consumer.objects.create(  # stored limits that do not parse (by hand): shown as ignored
        queue="fuzz-bad-limits", handler="app.f", lease=30, max_attempts=3,
        code_limits={"rate": [5, 10**400]}, limit_overrides={"concurrency": "9" * 5_000},
    )  # fmt: skip
    return rows


def state_hash() -> str:
    return hashlib.sha256(repr(snapshot()).encode()).hexdigest()


# -- the requests ----------------------------------------------------------------------------


def every_url(rows: dict[str, Model]) -> list[str]:
    urls = page_urls(rows)
    private = DeadLetter.objects.get(queue=PRIVATE_QUEUE).pk
    urls += [
        reverse(f"admin:{APP}_deadletter_change", args=[private]),
        reverse(f"admin:{APP}_queuestat_queue", args=[PRIVATE_QUEUE]),
        reverse(f"admin:{APP}_queuestat_queue", args=["shop-emails"]),
    ]
    return urls


def random_query(rng: random.Random) -> dict[str, str]:
    query: dict[str, str] = {}
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.5:
            key = rng.choice(PARAMS)
        else:
            lookup = rng.choice(LOOKUPS)
            key = rng.choice(FIELDS) + (f"__{lookup}" if lookup else "")
        query[key] = rng.choice(VALUES)
    return query


def random_post(rng: random.Random, rows: dict[str, Model]) -> dict[str, Any]:
    ids: list[Any] = [row.pk for row in rows.values()]
    body: dict[str, Any] = {
        "action": rng.choice(ACTIONS),
        "index": rng.choice(["0", "1", "-1", "x", "99999999999999999999"]),
        "_selected_action": rng.sample(ids + VALUES[:12], rng.randint(0, 4)),
    }
    optional = {
        "select_across": rng.choice(["0", "1", "x"]),
        "confirm": rng.choice(["yes", "no", ""]),
        "post": "yes",
        "priority": rng.choice(["7", "-40000", "40000", "x", ""]),
        "CHANGE_FORM-action": rng.choice(ACTIONS),
        "queue": rng.choice(VALUES),
        "paused": "on",
    }
    body |= {k: v for k, v in optional.items() if rng.random() < 0.3}
    return body


def request(client: Client, rng: random.Random, urls: list[str], rows: dict[str, Model]):
    url = rng.choice(urls)
    query = random_query(rng)
    extra = [urlencode(query)] if query else []
    if rng.random() < 0.05:  # bytes that are no UTF-8, as a hand-written URL may hold
        extra.append(rng.choice(["q=%ff%fe", "queue=%c0%af", "%ed%a0%80=1"]))
    full = "&".join([url, *extra]) if "?" in url else "?".join([url, "&".join(extra)])
    full = full.rstrip("?")
    if rng.random() < 0.25:
        data = random_post(rng, rows)
        return "POST", full, data, client.post(full, data)
    return "GET", full, None, client.get(full)


# -- the property ----------------------------------------------------------------------------


@SENSITIVE
@pytest.mark.parametrize("kind", KINDS)
def test_no_request_fails_grows_past_the_bound_or_writes_without_permission(kind: str):
    rows = seed_rows()
    urls = every_url(rows)
    client = client_for_kind(kind)
    rng = random.Random(f"{SEED}-{kind}")
    before = state_hash()
    for n in range(REQUESTS):
        method, url, data, response = request(client, rng, urls, rows)
        where = f"seed {SEED}, {kind}, request {n}: {method} {url} {data or ''}"[:2_000]
        assert response.status_code < 500, f"{response.status_code} on {where}"
        assert len(response.content) <= PAGE_BYTES_MAX, f"{len(response.content):,} B: {where}"
        if kind != "superuser":
            assert PRIVATE not in response.content.decode(errors="replace"), where
            assert state_hash() == before, f"rows changed: {where}"


#: The lists with a date hierarchy or a date filter, and their date field.
DATED_LISTS = {"finishedjob": "finished_at", "deadletter": "died_at"}


@SENSITIVE
@pytest.mark.parametrize("kind", ["staff-with-view-only", "superuser"])
def test_every_date_filter_value_answers_a_page_or_the_invalid_filter_redirect(kind: str):
    """Not left to chance: each of DATE_VALUES in each date parameter of each list with
    dates, and the hierarchy's year, month and day together (?finished_at__year=9999 answered
    500). `make test` sends a sample of the combinations, `make chaos` all of them."""
    seed_rows()
    client = client_for_kind(kind)
    queries = [
        {f"{field}__{part}": value}
        for field in DATED_LISTS.values()
        for part in ("year", "month", "day", "gte", "lt")
        for value in DATE_VALUES
    ] + [
        {"finished_at__year": year, "finished_at__month": month, "finished_at__day": day}
        for year in DATE_VALUES[:12]
        for month in ("12", "13", "99999999999999999999")
        for day in ("31", "0")
    ]
    rng = random.Random(f"{SEED}-dates-{kind}")
    for query in queries if LONG else rng.sample(queries, 60):
        (name,) = [n for n, field in DATED_LISTS.items() if next(iter(query)).startswith(field)]
        url = f"{changelist(name)}?{urlencode(query)}"
        response = client.get(url)
        where = f"seed {SEED}, {kind}: GET {url}"
        assert response.status_code in (200, 302), f"{response.status_code} on {where}"
        if response.status_code == 302:
            assert response["Location"].endswith(f"{changelist(name)}?e=1"), where


def test_every_registered_changelist_is_in_the_fuzzed_urls():
    rows = seed_rows()
    urls = set(every_url(rows))
    assert {changelist(name) for name, _ in registered()} <= urls
