"""The Prometheus view (django_alkqueue.reports.metrics): who may scrape it, and that what it
exposes is what the tables hold, parsed with prometheus_client's own parser."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from django_alkqueue import queue
from django_alkqueue.models import Consumer, FinishedJob, QueueStat, Worker
from django_alkqueue.reports.metrics.collector import hour_of
from django_alkqueue.reports.metrics.hour_sums import hour_sums
from django_alkqueue.sql import dialect_name
from django_alkqueue.worker.queue_stats import QueueStatCountService
from tests.admin_helpers import Seeded, add_worker, client_for, make_user
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db

URL = "/metrics/"
TOKEN = "s3cret-token-of-the-scraper"


def samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, keyed by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def scrape(client: Client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get(URL, headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return samples(response.content)


# -- who may scrape ------------------------------------------------------------------------------


def test_an_anonymous_scrape_is_refused_with_401_and_a_bearer_challenge():
    response = Client().get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="alkqueue"'


def test_a_staff_user_without_the_view_permission_is_refused():
    assert Client().get(URL).status_code == 401
    assert client_for(make_user("clerk")).get(URL).status_code == 403


def test_a_staff_user_with_the_view_permission_may_scrape():
    assert client_for(make_user("ops", "view_queuestat")).get(URL).status_code == 200


@override_settings(ALKQUEUE={"METRICS_TOKEN": TOKEN})
def test_the_bearer_token_opens_the_view_without_a_login():
    assert Client().get(URL, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@override_settings(ALKQUEUE={"METRICS_TOKEN": TOKEN})
def test_a_wrong_bearer_token_is_refused():
    response = Client().get(URL, headers={"Authorization": "Bearer not-the-token"})
    assert response.status_code == 403


def test_no_token_is_accepted_when_none_is_configured():
    response = Client().get(URL, headers={"Authorization": "Bearer "})
    assert response.status_code == 403


# -- what it exposes -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_kept_sums() -> None:
    """The scrape keeps the settled minutes' sums per process (hour_sums): each test's
    database starts without them."""
    hour_sums.clear()


def test_depth_by_state_and_paused_are_the_leaders_last_reading(root: Client, seeded: Seeded):
    QueueStatCountService("default").run_once(timezone.now())
    got = scrape(root)
    emails, webhooks = (("queue", "shop-emails"),), (("queue", "shop-webhooks"),)
    for state, ids in [
        ("pending", seeded.pending),
        ("scheduled", seeded.scheduled),
        ("claimed", seeded.claimed),
    ]:
        assert got[("alkqueue_jobs", (*emails, ("state", state)))] == len(ids)
    assert got[("alkqueue_jobs", (*webhooks, ("state", "dead")))] == len(seeded.dead)
    assert got[("alkqueue_queue_paused", webhooks)] == 1
    assert got[("alkqueue_queue_paused", emails)] == 0
    assert got[("alkqueue_oldest_pending_age_seconds", emails)] >= 0


def test_the_job_counters_sum_this_hours_minutes_and_start_at_the_hour(root: Client):
    hour = hour_of(timezone.now())
    QueueStat.objects.create(queue="q", minute=hour, finished=5, failed=2, dead_lettered=1)
    QueueStat.objects.create(queue="q", minute=hour - timedelta(minutes=1), finished=1000)
    if hour_of(timezone.now()) != hour:
        pytest.skip("the hour turned during the test")

    got = scrape(root)

    q = (("queue", "q"),)
    assert got[("alkqueue_jobs_finished_total", q)] == 5
    assert got[("alkqueue_jobs_failed_total", q)] == 2
    assert got[("alkqueue_jobs_dead_lettered_total", q)] == 1
    assert got[("alkqueue_jobs_finished_created", q)] == hour.timestamp()


def test_the_retried_counter_sums_this_hours_minutes(root: Client):
    hour = hour_of(timezone.now())
    QueueStat.objects.create(queue="q", minute=hour, failed=7, retried=4)
    QueueStat.objects.create(queue="q", minute=hour + timedelta(minutes=1), failed=2, retried=2)
    QueueStat.objects.create(queue="q", minute=hour - timedelta(minutes=1), retried=1000)
    if hour_of(timezone.now()) != hour:
        pytest.skip("the hour turned during the test")

    got = scrape(root)

    assert got[("alkqueue_jobs_retried_total", (("queue", "q"),))] == 6


def test_the_handler_duration_histogram_sums_this_hours_minutes_into_cumulative_buckets(
    root: Client,
):
    hour = hour_of(timezone.now())
    # Three calls: 3 ms, 40 ms and 2 s; then one of 400 s (past every bound) a minute later.
    QueueStat.objects.create(
        queue="q", minute=hour, duration_count=3, duration_sum=2.043, duration_le_5ms=1,
        duration_le_25ms=1, duration_le_100ms=2, duration_le_500ms=2, duration_le_1s=2,
        duration_le_5s=3, duration_le_30s=3, duration_le_300s=3,
    )  # fmt: skip
    QueueStat.objects.create(
        queue="q", minute=hour + timedelta(minutes=1), duration_count=1, duration_sum=400.0
    )
    if hour_of(timezone.now()) != hour:
        pytest.skip("the hour turned during the test")

    got = scrape(root)

    def bucket(le: str) -> float:
        return got[("alkqueue_handler_duration_seconds_bucket", (("le", le), ("queue", "q")))]

    assert [bucket(le) for le in ("0.005", "0.1", "1.0", "5.0", "300.0", "+Inf")] == [
        1, 2, 2, 3, 3, 4,
    ]  # fmt: skip
    assert got[("alkqueue_handler_duration_seconds_count", (("queue", "q"),))] == 4
    assert got[("alkqueue_handler_duration_seconds_sum", (("queue", "q"),))] == 402.043


def test_workers_by_state_and_the_leader(root: Client):
    add_worker("w-live")
    add_worker("w-stale", stale=True)
    assert scrape(root)[("alkqueue_leader", ())] == 0
    Worker.objects.filter(worker_id="w-live").update(is_leader=True)

    got = scrape(root)

    assert got[("alkqueue_workers", (("state", "live"),))] == 1
    assert got[("alkqueue_workers", (("state", "stale"),))] == 1
    assert got[("alkqueue_leader", ())] == 1


def dead_tuples(got: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:
    return {dict(labels)["table"]: v for (name, labels), v in got.items()
            if name == "alkqueue_dead_tuples"}  # fmt: skip


def test_dead_tuples_are_exposed_for_every_queue_table_where_the_server_counts_them(root):
    tables = dead_tuples(scrape(root))
    if dialect_name(connection) != "postgresql":
        assert tables == {}
        return
    assert set(tables) == {model._meta.db_table for model in apps.get_app_config(
        "django_alkqueue").get_models()}  # fmt: skip
    assert {"alkqueue_message", "alkqueue_deadletter", "alkqueue_finishedjob",
            "alkqueue_queuestat", "alkqueue_batch", "alkqueue_batchmember",
            "alkqueue_dependency", "alkqueue_waitingjob"} <= set(tables)  # fmt: skip
    assert all(count >= 0 for count in tables.values())


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)  # the deletes must commit to leave dead rows
def test_the_kept_historys_partitions_are_one_figure_under_its_table(root):
    at = timezone.now()
    FinishedJob.objects.bulk_create(
        FinishedJob(job_id=n, queue="kept", payload={}, attempts=1, max_attempts=3,
                    backoff_base=5, lease=30, enqueued_at=at, finished_at=at,
                    outcome="succeeded", delete_after=at)
        for n in range(1, 51)
    )  # fmt: skip
    FinishedJob.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")

    wait_until(lambda: dead_tuples(scrape(root)).get("alkqueue_finishedjob", 0) >= 50,
               what="the finished jobs' dead rows counted")  # fmt: skip
    assert not [t for t in dead_tuples(scrape(root)) if t.startswith("alkqueue_finishedjob_")]


def test_jobs_waiting_for_their_dependencies_are_waiting_not_scheduled(root: Client):
    first = queue("wf").enqueue({})
    queue("wf").enqueue_many([{}, {}], after=[first])
    queue("wf").enqueue({}, delay=600)
    QueueStatCountService("default").run_once(timezone.now())

    got = scrape(root)

    wf = (("queue", "wf"),)
    assert got[("alkqueue_jobs", (*wf, ("state", "waiting")))] == 2
    assert got[("alkqueue_jobs", (*wf, ("state", "scheduled")))] == 1
    assert got[("alkqueue_jobs", (*wf, ("state", "pending")))] == 1


def test_throttled_jobs_are_the_due_ones_a_full_concurrency_holds_back(root: Client):
    api = queue("api")
    api.enqueue_many([{}] * 5)
    Consumer.objects.create(queue="api", handler="app.f", lease=30, max_attempts=3,
                            limit_overrides={"concurrency": 2})  # fmt: skip
    assert len(api.claim("w-1", 2)) == 2
    QueueStatCountService("default").run_once(timezone.now())

    got = scrape(root)

    assert got[("alkqueue_jobs_throttled", (("queue", "api"),))] == 3
    assert got[("alkqueue_jobs", (("queue", "api"), ("state", "pending")))] == 3


def test_a_queue_without_limits_has_no_throttled_jobs(root: Client):
    queue("plain").enqueue_many([{}] * 5)
    QueueStatCountService("default").run_once(timezone.now())
    assert scrape(root)[("alkqueue_jobs_throttled", (("queue", "plain"),))] == 0
