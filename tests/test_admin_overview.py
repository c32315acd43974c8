"""The queue overview and the queue detail page: their numbers equal the true counts of a
seeded database; the throughput and the charts come from the QueueStat minutes."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

import django_alkqueue
from django_alkqueue import queue
from django_alkqueue.admin.charts import WINDOWS, bucketize
from django_alkqueue.models import DeadLetter, QueueMessage, QueueStat
from django_alkqueue.reports import database_health
from django_alkqueue.reports.queue_stats import history, hourly_history, minute_of
from tests.admin_helpers import (
    CONSUMERS,
    DEAD,
    JOBS,
    OVERVIEW,
    VIEW_PERMS,
    WORKERS,
    add_worker,
    client_for,
    dead_lettered,
    make_user,
    queue_url,
)

pytestmark = [pytest.mark.django_db, pytest.mark.seed(pending=4, dead=3)]


def true_counts(name: str) -> dict[str, int]:
    now = timezone.now()
    live = QueueMessage.objects.filter(queue=name)
    return {
        "pending": live.pending(now).count(),
        "scheduled": live.scheduled(now).count(),
        "claimed": live.claimed().count(),
        "dead": DeadLetter.objects.filter(queue=name).count(),
    }


def shown_figures(html: str, name: str) -> dict[str, int]:
    row = re.search(rf'<tr data-queue="{name}">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r'data-figure="(\w+)">(?:<a [^>]*>)?([\d,]+)', row)
    return {figure: int(value.replace(",", "")) for figure, value in cells}


def test_the_overview_numbers_equal_the_true_counts(seeded, root):
    queue("shop-reports").enqueue_many([{}] * 3, delay=60)
    html = root.get(OVERVIEW).content.decode()
    for name in ("shop-emails", "shop-webhooks", "shop-reports"):
        shown = shown_figures(html, name)
        assert {k: shown[k] for k in ("pending", "scheduled", "claimed", "dead")} == true_counts(
            name
        ), name


def test_the_overview_has_a_totals_row(seeded, root):
    response = root.get(OVERVIEW)
    totals = response.context["totals"]
    assert (totals["pending"], totals["scheduled"], totals["claimed"], totals["dead"]) == (
        QueueMessage.objects.pending(timezone.now()).count(),
        QueueMessage.objects.scheduled(timezone.now()).count(),
        QueueMessage.objects.claimed().count(),
        DeadLetter.objects.count(),
    )
    assert 'id="alk-totals"' in response.content.decode()


def test_the_overview_lists_queues_known_only_from_a_consumer_or_dead_letters(seeded, root):
    rows = {r.figures.queue: r for r in root.get(OVERVIEW).context["rows"]}
    assert set(rows) == {"shop-emails", "shop-webhooks"}
    assert rows["shop-webhooks"].figures.paused
    assert rows["shop-webhooks"].figures.handler == "testproject.shop.consumers.deliver_webhook"


def test_throughput_counts_the_last_5_and_60_minutes(seeded, root):
    now = minute_of(timezone.now())
    for minutes_ago, finished, failed in [
        (0, 5, 1),
        (4, 2, 0),
        (5, 10, 3),
        (59, 1, 1),
        (60, 100, 100),
    ]:
        QueueStat.objects.create(
            queue="shop-emails",
            minute=now - timedelta(minutes=minutes_ago),
            finished=finished,
            failed=failed,
        )
    row = next(r for r in root.get(OVERVIEW).context["rows"] if r.figures.queue == "shop-emails")
    assert (row.rate.finished_5m, row.rate.failed_5m) == (7, 1)
    assert (row.rate.finished_1h, row.rate.failed_1h) == (18, 5)


def test_each_queue_has_an_inline_svg_chart_of_the_last_24_hours(seeded, root):
    now = minute_of(timezone.now())
    for minutes_ago in (30, 20, 10):
        QueueStat.objects.create(
            queue="shop-emails",
            minute=now - timedelta(minutes=minutes_ago),
            pending=minutes_ago,
            finished=3,
            failed=1,
        )
    QueueStat.objects.create(queue="shop-emails", minute=now - timedelta(hours=25), pending=999)
    html = root.get(OVERVIEW).content.decode()
    row = re.search(r'<tr data-queue="shop-emails">(.*?)</tr>', html, re.S).group(1)
    assert "<svg" in row and "<path" in row
    assert "depth now 10, at most 30; finished 9, failed 3" in row
    assert "http" not in re.sub(r'xmlns="http://www.w3.org/2000/svg"', "", row.split("<svg")[1])


def test_the_seven_day_chart_sums_hours_in_the_database_as_the_minutes_would_be_bucketed():
    now = minute_of(timezone.now()) + timedelta(seconds=17)
    start = now - timedelta(days=7)
    rows = []
    for queue_name, step in (("a", 37), ("b", 53)):  # minutes that fall unevenly in hours
        for n, at in enumerate(range(0, 7 * 24 * 60 + 120, step)):
            minute = minute_of(start) - timedelta(minutes=60) + timedelta(minutes=at)
            if minute <= now:
                rows.append(QueueStat(queue=queue_name, minute=minute, pending=n % 7,
                                      scheduled=n % 3, claimed=n % 2, finished=n % 11,
                                      failed=n % 5, dead_lettered=n % 2))  # fmt: skip
    QueueStat.objects.bulk_create(rows)
    week = WINDOWS["7d"]
    minutes = history("default", now, 24 * 7, queues=["a", "b"])
    hours = hourly_history("default", now, 24 * 7, ["a", "b"])
    for name in ("a", "b"):
        by_minute = bucketize(minutes[name], now, week)
        by_hour = bucketize(hours[name], now, week)
        assert [vars(b) for b in by_hour] == [vars(b) for b in by_minute]
        assert len(hours[name]) <= 24 * 7 + 1 < len(minutes[name])


def test_the_overview_fetches_nothing_from_the_internet(seeded, root):
    html = root.get(OVERVIEW).content.decode()
    assert not re.search(r'(src|href)="(https?:)?//', html)


def test_the_live_pages_load_live_js_and_reload_themselves_only_without_scripts(seeded, root):
    for url in (OVERVIEW, queue_url("shop-emails"), JOBS):
        html = root.get(url).content.decode()
        assert 'src="/static/django_alkqueue/live.js"' in html, url
        assert 'id="alk-live-control"' in html, url
        head = html.split("</head>")[0]
        assert re.sub(r"<noscript>.*?</noscript>", "", head, flags=re.S).count("http-equiv") == 0


def test_the_reload_without_scripts_is_on_until_turned_off(seeded, root):
    on = root.get(OVERVIEW).content.decode()
    assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in on
    assert "?refresh=0" in on
    off = root.get(OVERVIEW, {"refresh": "0"}).content.decode()
    assert 'http-equiv="refresh"' not in off


def test_the_job_list_reloads_itself_without_scripts_until_turned_off(seeded, root):
    emails = {"queue": "shop-emails"}
    on = root.get(JOBS, emails).content.decode()
    assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in on
    assert 'href="?queue=shop-emails&amp;refresh=0" id="alk-refresh"' in on

    off = root.get(JOBS, {**emails, "refresh": "0"})

    assert off.status_code == 200  # ?refresh= is not taken for a lookup (no ?e=1 redirect)
    assert off.context["cl"].result_count == QueueMessage.objects.filter(**emails).count()
    assert 'http-equiv="refresh"' not in off.content.decode()
    assert 'href="?queue=shop-emails" id="alk-refresh">Turn on auto-refresh' in (
        off.content.decode()
    )
    assert "refresh=0" in off.context["cl"].get_query_string({"o": "1"})  # sort links keep it


def test_only_the_live_pages_reload_themselves_without_scripts(seeded, root):
    for url in (DEAD, CONSUMERS, WORKERS):
        assert 'http-equiv="refresh"' not in root.get(url).content.decode(), url


def test_the_live_script_is_served_by_the_app_and_fetches_only_its_own_page():
    script = (Path(django_alkqueue.__file__).parent / "static/django_alkqueue/live.js").read_text()
    assert "fetch(window.location.href" in script
    assert not re.search(r"https?://|import |require\(", script)


def test_the_overview_summarises_the_workers(seeded, root):
    add_worker("host:1")
    add_worker("host:2", stale=True)
    response = root.get(OVERVIEW)
    assert (response.context["live_workers"], response.context["stale_workers"]) == (1, 1)
    assert "no live leader" in response.content.decode()


def test_with_no_worker_at_all_the_overview_says_so_in_neutral_words(seeded, root):
    page = root.get(OVERVIEW).content.decode()

    assert "No worker is running: the last one exited, or none has started." in page
    assert "no live leader" not in page


def test_the_overview_warns_about_jobs_held_by_a_stale_worker(root):
    add_worker("host:gone", stale=True)
    queue("shop-emails").enqueue({})
    queue("shop-emails").claim_one("host:gone")
    html = root.get(OVERVIEW).content.decode()
    assert "1 job is claimed by workers that stopped heartbeating" in html


def test_the_health_section_runs_the_catalog_checks_on_postgresql(seeded, root, is_postgres):
    titles = [c.title for c in root.get(OVERVIEW).context["checks"]]
    if is_postgres:
        assert titles == [
            "Dead tuples and autovacuum",
            "Oldest transaction",
            "Replication slots",
            "Claims of stale workers",
        ]
    elif connection.vendor == "mysql":
        assert titles == ["InnoDB history list length", "Claims of stale workers"]
    else:
        assert titles == ["Claims of stale workers"]


def test_the_queue_detail_shows_its_figures_consumer_and_links(seeded, root):
    response = root.get(queue_url("shop-emails"))
    figures = response.context["figures"]
    assert {k: getattr(figures, k) for k in ("pending", "scheduled", "claimed", "dead")} == (
        true_counts("shop-emails")
    )
    html = response.content.decode()
    assert "testproject.shop.consumers.send_email" in html
    assert 'href="/admin/django_alkqueue/queuemessage/?queue=shop-emails"' in html
    assert 'href="/admin/django_alkqueue/deadletter/?queue=shop-emails"' in html


def test_the_queue_detail_groups_its_most_frequent_errors(seeded, root):
    dead_lettered("shop-webhooks", {}, "TimeoutError: read timed out\n\nTraceback ...")
    errors = root.get(queue_url("shop-webhooks")).context["errors"]
    groups = [(e.title, e.count) for e in errors]
    assert groups == [("ConnectionError: refused <num>", 3), ("TimeoutError: read timed out", 1)]


def test_the_queue_detail_draws_its_four_charts_over_the_chosen_window(seeded, root):
    QueueStat.objects.create(queue="shop-emails", minute=minute_of(timezone.now()), pending=4)
    html = root.get(queue_url("shop-emails") + "?window=1h").content.decode()
    for chart in ("throughput", "depth", "wait", "run"):
        assert f'id="alk-chart-{chart}"' in html
    assert "pending (due, waiting for a worker): now 4, at most 4" in html
    assert "Jobs per 1 min" in html


def test_the_window_chooser_keeps_the_other_parameters_and_marks_the_current_window(root, seeded):
    html = root.get(OVERVIEW + "?q=shop&window=7d").content.decode()
    assert 'href="?q=shop&amp;window=6h"' in html
    assert 'aria-current="true" class="alk-window-current">7 d<' in html
    assert '<input type="hidden" name="window" value="7d">' in html


def test_a_view_only_user_sees_the_overview_without_links_it_cannot_follow(seeded):
    client = client_for(make_user("viewer", "view_queuestat"))
    html = client.get(OVERVIEW).content.decode()
    assert "/admin/django_alkqueue/deadletter/" not in html
    assert client_for(make_user("all", *VIEW_PERMS)).get(OVERVIEW).status_code == 200


def test_stale_claims_judgement_flags_lapsed_leases_nobody_reclaims():
    now = timezone.now()
    claims = [
        {
            "claimed_by": "host:9",
            "jobs": 2,
            "lapsed": 2,
            "first_lapse": now - timedelta(minutes=5),
        }
    ]
    check = database_health.judge_claims(claims, {"host:9": now - timedelta(minutes=10)}, now)
    assert "2 jobs are claimed by workers that stopped heartbeating" in check.warning
    assert "no worker is reclaiming" in check.warning
    fresh = database_health.judge_claims(
        [{**claims[0], "lapsed": 0, "first_lapse": None}], {"host:9": now}, now
    )
    assert fresh.warning is None


def test_a_queue_whose_consumer_no_worker_served_yet_shows_its_code_handler_in_amber(root):
    queue("shop-reports").enqueue({})  # a view enqueued before any worker started

    overview = root.get(OVERVIEW).content.decode()
    page = root.get(queue_url("shop-reports")).content.decode()

    assert 'title="testproject.shop.consumers.build_report"' in overview
    assert '<span class="alk-amber">no worker has served it yet</span>' in overview
    assert "testproject.shop.consumers.build_report" in page
    assert "No worker has served this queue yet" in page
    assert "No consumer is bound" not in page
