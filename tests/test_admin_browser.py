"""The admin in a real browser: Playwright for Python driving Debian's Chromium (installed by
`make test`; Playwright never downloads one). An operator logs in, reads the overview, opens a
queue's dead letters, requeues one, a real worker runs it, and the overview shows it done.
Screenshots of every page land in test-artifacts/admin/. A browser asking for German gets
the admin in German (LocaleMiddleware, django_alkqueue/locale/de).

PostgreSQL only: the live server, the test and the worker subprocess share the database.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.admin.compat import DETAIL_PAGE_ACTIONS
from django_alkqueue.models import Consumer, QueueMessage, QueueStat
from django_alkqueue.reports.queue_stats import minute_of
from testproject.shop.models import HandlerRun
from tests.admin_helpers import add_worker, dead_lettered, make_user
from tests.workers import ROOT, run_worker

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "admin"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HANDLERS = {
    "shop-emails": "send_email",
    "shop-reports": "build_report",
    "shop-webhooks": "deliver_webhook",
    "shop-ledger": "post_to_ledger",
}


@pytest.fixture
def browser_locale() -> str:
    """The browser's language (its Accept-Language); a test parametrizes it to change it."""
    return "en-US"


@pytest.fixture
def page(live_server, monkeypatch, browser_locale) -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: run `make test`, or apt-get install -y chromium")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls
    # between browser steps are synchronous all the same.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(
            viewport={"width": 1440, "height": 900}, locale=browser_locale
        )
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.base_url = live_server.url  # type: ignore[attr-defined]
        yield page
        # Inside Playwright's loop Django keys connections on the loop's context: close the
        # ones the test opened there, or they outlive the test database.
        connections.close_all()
        context.close()
        browser.close()


#: The screenshots the docs show, by the name a test gives them: a run with
#: ALKQUEUE_DOC_IMAGES=1 (`make screenshots`, on PostgreSQL) writes them to docs/images.
DOC_IMAGES = {
    "overview": "admin-overview.png",
    "overview-390": "admin-overview-390.png",
    "overview-queues-1280": "admin-overview-queues-1280.png",
    "queue": "admin-queue.png",
    "dead-letters": "admin-dead-letters.png",
    "requeue-confirmation": "admin-requeue-confirmation.png",
    "jobs-1280": "admin-jobs.png",
    "queue-error-groups": "admin-error-groups.png",
    "workflow-graph": "admin-workflow-graph.png",
    "workflow-batch": "admin-batch.png",
}


def shot(page, name: str) -> None:
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    shot_element(name)


def shot_element(name: str) -> None:
    """Copy the screenshot test-artifacts/admin/<name>.png to docs/images when it is one of
    DOC_IMAGES and the run makes them (an element's, taken by the test itself)."""
    path = ARTIFACTS / f"{name}.png"
    if os.environ.get("ALKQUEUE_DOC_IMAGES") == "1" and name in DOC_IMAGES:
        shutil.copyfile(path, ROOT / "docs" / "images" / DOC_IMAGES[name])


def seed_history(names: list[str]) -> None:
    """24 hours of per-minute stats, shaped like a working day, for the charts."""
    now = minute_of(timezone.now())
    rows = []
    for n, name in enumerate(names):
        for m in range(1, 24 * 60, 2):
            wave = 1 + math.sin((m / 180) + n)
            rows.append(
                QueueStat(
                    queue=name,
                    minute=now - timedelta(minutes=m),
                    pending=int(40 * wave * (n + 1)),
                    claimed=4,
                    finished=int(30 * wave) + 5,
                    failed=int(3 * (1 - wave / 2)),
                    # Wait and run histograms: most attempts quick, a tail at the peaks.
                    wait_30ms=int(20 * wave) + 3,
                    wait_100ms=5,
                    wait_1s=int(4 * wave),
                    wait_3s=int(2 * wave),
                    # The run time is the handler duration histogram (cumulative).
                    **_durations(int(10 * wave) + 2, int(15 * wave) + 2, 2, int(3 * wave)),
                )
            )
    QueueStat.objects.bulk_create(rows)


def _durations(le_100ms: int, to_500ms: int, to_1s: int, to_5s: int) -> dict[str, int]:
    """QueueStat's duration columns for calls of up to 100 ms, 500 ms, 1 s and 5 s."""
    le_5s = le_100ms + to_500ms + to_1s + to_5s
    return {
        "duration_le_100ms": le_100ms, "duration_le_500ms": le_100ms + to_500ms,
        "duration_le_1s": le_100ms + to_500ms + to_1s, "duration_le_5s": le_5s,
        "duration_le_30s": le_5s, "duration_le_300s": le_5s, "duration_count": le_5s,
    }  # fmt: skip


def seed_incident() -> list[int]:
    for name, handler in HANDLERS.items():
        Consumer.objects.create(
            queue=name,
            handler=f"testproject.shop.consumers.{handler}",
            lease=30,
            max_attempts=3,
            paused=name == "shop-ledger",
            retry_policy={"backoff": "constant", "base": 0},
        )
    queue("shop-emails").enqueue_many([{"to": f"user{i}@example.com"} for i in range(5)])
    queue("shop-emails").enqueue_many([{"to": "later@example.com"}] * 2, delay=3600)
    queue("shop-reports").enqueue_many([{"kind": "daily"}] * 3)
    queue("shop-ledger").enqueue({"amount": 100})
    dead = [
        dead_lettered(
            "shop-webhooks",
            {"url": f"https://example.com/hook/{i}"},
            "ConnectionError: connection refused by example.com\n\nTraceback (most recent call "
            'last):\n  File "shop/consumers.py", line 41, in deliver_webhook\n'
            "ConnectionError: connection refused by example.com",
        )
        for i in range(3)
    ]
    dead.append(
        dead_lettered("shop-webhooks", {"url": "https://example.com/hook/x"}, "TimeoutError: 30 s")
    )
    add_worker("web-1:4242")
    add_worker("web-2:977", stale=True)
    queue("shop-reports").claim_one("web-2:977")  # held by a worker that stopped heartbeating
    seed_history(["shop-emails", "shop-reports", "shop-webhooks"])
    make_user("admin", superuser=True)
    return dead


def figure(page, name: str, which: str) -> str:
    return page.inner_text(f'tr[data-queue="{name}"] [data-figure="{which}"]').strip()


def test_an_operator_requeues_a_dead_letter_and_a_worker_runs_it(page):
    dead = seed_incident()
    base = page.base_url
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#content-main")
    page.click("a:has-text('Queue overview')")

    page.wait_for_selector("#alk-queues")
    assert figure(page, "shop-emails", "pending") == "5"
    assert figure(page, "shop-emails", "scheduled") == "2"
    assert figure(page, "shop-reports", "claimed") == "1"
    assert figure(page, "shop-webhooks", "dead") == "4"
    assert page.locator('tr[data-queue="shop-emails"] svg.alk-chart path').count() == 1
    assert page.locator("#alk-health .alk-warning").count() >= 1
    shot(page, "overview")

    page.click('tr[data-queue="shop-webhooks"] td:first-child a')
    page.wait_for_selector("#alk-figures")
    assert "ConnectionError: connection refused by example.com" in page.inner_text("#alk-errors")
    shot(page, "queue")

    page.click("#alk-dead-link")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 4
    shot(page, "dead-letters")

    page.click("#alk-requeue-all button")
    page.wait_for_selector("#alk-confirm-count")
    assert page.inner_text("#alk-confirm-count strong") == "4"
    shot(page, "requeue-confirmation")
    page.click("a.cancel-link")
    page.wait_for_selector("#result_list")

    first = page.locator("#result_list tbody tr").first
    job_id = int(first.locator("td.field-job_id").inner_text())
    dead_id = int(first.locator("th a").inner_text())
    first.locator("th a").click()
    page.wait_for_selector(".field-last_error_text pre")
    shot(page, "dead-letter")

    if DETAIL_PAGE_ACTIONS:  # Django 6.1: straight from the dead letter's page
        page.select_option("select[name='CHANGE_FORM-action']", "requeue")
        page.click("#content-main .actions button")
    else:  # Django 5.2: tick it on the list
        page.go_back()
        page.wait_for_selector("#result_list")
        page.locator("#result_list tbody tr").first.locator("input.action-select").check()
        page.select_option("select[name='action']", "requeue")
        page.click("button[name='index']")
    page.wait_for_selector(".messagelist")
    assert f"Requeued 1 dead letter as job {job_id}." in page.inner_text(".messagelist")
    assert QueueMessage.objects.filter(pk=job_id).exists()
    page.goto(f"{base}/admin/django_alkqueue/queuemessage/{job_id}/change/")
    assert f"dead letter #{dead_id} on " in page.inner_text(".field-requeued_from")
    shot(page, "job")

    run_worker("--queue", "shop-webhooks", "--burst")
    assert HandlerRun.objects.filter(queue="shop-webhooks", job_id=job_id).exists()
    assert not QueueMessage.objects.filter(pk=job_id).exists()

    page.goto(f"{base}/admin/django_alkqueue/queuestat/")
    page.wait_for_selector("#alk-queues")
    assert figure(page, "shop-webhooks", "dead") == str(len(dead) - 1)
    assert figure(page, "shop-webhooks", "pending") == "0"
    assert int(figure(page, "shop-webhooks", "finished_5m")) >= 1
    shot(page, "overview-after-requeue")


def test_the_list_pages_render_in_the_browser(page):
    seed_incident()
    base = page.base_url
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    for path, name in [
        ("queuemessage/", "jobs"),
        ("queuemessage/?state=pending", "jobs-pending"),
        ("consumer/", "consumers"),
        ("worker/", "workers"),
    ]:
        page.goto(f"{base}/admin/django_alkqueue/{path}")
        page.wait_for_selector("#result_list")
        shot(page, name)
    page.goto(f"{base}/admin/django_alkqueue/consumer/")
    page.locator("#result_list tbody tr", has_text="shop-emails").locator(
        "input.action-select"
    ).check()
    page.select_option("select[name='action']", "pause")
    page.click("#changelist-form .actions button")
    page.wait_for_selector(".messagelist")
    assert "Paused 1 queue: shop-emails." in page.inner_text(".messagelist")
    assert Consumer.objects.get(queue="shop-emails").paused


def log_in(page) -> None:
    page.goto(f"{page.base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#content-main")


@pytest.mark.parametrize("browser_locale", ["de-DE"])
def test_an_operator_whose_browser_asks_for_german_reads_the_admin_in_german(page):
    seed_incident()
    base = page.base_url
    log_in(page)
    assert page.locator("html").get_attribute("lang") == "de"
    page.click("a:has-text('Warteschlangen-Übersicht')")

    page.wait_for_selector("#alk-queues")
    headers = page.locator("#alk-queues thead th").all_text_contents()
    assert headers[:3] == ["Warteschlange, Consumer", "Wartend", "Geplant"]
    assert figure(page, "shop-emails", "pending") == "5"
    assert "pausiert" in page.inner_text('tr[data-queue="shop-ledger"]')
    assert page.inner_text("#alk-totals td:first-child") == "Gesamt (4 Warteschlangen)"
    assert "1 aktiv, 1 veraltet; kein aktiver Leader" in page.inner_text("#alk-workers")
    assert "Übernahmen veralteter Worker" in page.inner_text("#alk-health")
    shot(page, "de-overview")

    page.click('tr[data-queue="shop-webhooks"] td:first-child a')
    page.wait_for_selector("#alk-figures")
    assert page.inner_text("#alk-dead-link") == "Dead Letters von shop-webhooks"
    assert "Häufigste Fehler" in page.inner_text("#content-main")
    assert "Durchsatz in den letzten 24 h" in (page.text_content("svg.alk-chart") or "")
    assert "wartend (fällig, wartet auf einen Worker)" in page.inner_text("#alk-chart-depth")
    shot(page, "de-queue")

    page.goto(f"{base}/admin/django_alkqueue/queuemessage/?state=pending")
    page.wait_for_selector("#result_list")
    assert "Nach Zustand" in page.inner_text("#changelist-filter")
    assert set(page.locator("#result_list span.alk-state").all_inner_texts()) == {"wartend"}
    assert page.inner_text("#alk-result-count").endswith("Jobs")
    shot(page, "de-jobs")

    page.goto(f"{base}/admin/django_alkqueue/deadletter/")
    page.wait_for_selector("#result_list")
    first = page.locator("#result_list tbody tr").first
    job_id = int(first.locator("td.field-job_id").inner_text())
    first.locator("th a").click()
    page.wait_for_selector(".field-last_error_text pre")
    legends = page.locator("fieldset h2, fieldset legend").all_text_contents()
    assert {"Fehler", "Nutzdaten", "Zeitpunkte"} <= {text.strip() for text in legends}
    shot(page, "de-dead-letter")

    if DETAIL_PAGE_ACTIONS:  # Django 6.1: straight from the dead letter's page
        page.select_option("select[name='CHANGE_FORM-action']", "requeue")
        page.click("#content-main .actions button")
    else:  # Django 5.2: tick it on the list
        page.go_back()
        page.wait_for_selector("#result_list")
        page.locator("#result_list tbody tr").first.locator("input.action-select").check()
        page.select_option("select[name='action']", "requeue")
        page.click("button[name='index']")
    page.wait_for_selector(".messagelist")
    assert f"1 Dead Letter als Job {job_id} erneut eingereiht." in page.inner_text(".messagelist")
    shot(page, "de-requeued")
