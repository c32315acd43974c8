"""The admin in a real browser: Playwright for Python driving Debian's Chromium (installed by
`make test`; Playwright never downloads one). An operator logs in, reads the overview, opens a
queue's dead letters, requeues one, a real worker runs it, and the overview shows it done.
Screenshots of every page land in test-artifacts/admin/.

PostgreSQL only: the live server, the test and the worker subprocess share the database.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.admin.compat import DETAIL_PAGE_ACTIONS
from django_alkqueue.models import Consumer, QueueMessage, QueueStat
from django_alkqueue.status import minute_of
from testproject.shop.models import HandlerRun
from tests.admin_helpers import add_worker, bury, make_user
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
def page(live_server, monkeypatch) -> Iterator[object]:
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
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.base_url = live_server.url  # type: ignore[attr-defined]
        yield page
        # Inside Playwright's loop Django keys connections on the loop's context: close the
        # ones the test opened there, or they outlive the test database.
        connections.close_all()
        context.close()
        browser.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


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
                )
            )
    QueueStat.objects.bulk_create(rows)


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
        bury(
            "shop-webhooks",
            {"url": f"https://example.com/hook/{i}"},
            "ConnectionError: connection refused by example.com\n\nTraceback (most recent call "
            'last):\n  File "shop/consumers.py", line 41, in deliver_webhook\n'
            "ConnectionError: connection refused by example.com",
        )
        for i in range(3)
    ]
    dead.append(bury("shop-webhooks", {"url": "https://example.com/hook/x"}, "TimeoutError: 30 s"))
    add_worker("web-1:4242")
    add_worker("web-2:977", stale=True)
    queue("shop-reports").claim_one("web-2:977")  # held by a worker that stopped heartbeating
    seed_history(["shop-emails", "shop-reports", "shop-webhooks"])
    make_user("admin", superuser=True)
    return dead


def figure(page, name: str, which: str) -> str:
    return page.inner_text(f'tr[data-queue="{name}"] td[data-figure="{which}"]').strip()


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
