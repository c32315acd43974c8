"""The operator's console in a real browser (issue 37): the chart window chooser, the
charts' tooltips, a one-bucket series, dark mode and 200% zoom; error groups, their filter
and their requeue. Fixtures and screenshots as in test_admin_browser.py.

PostgreSQL only: the live server and the test share the database.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from django_alkqueue.models import DeadLetter, QueueMessage, QueueStat
from django_alkqueue.reports.queue_stats import minute_of
from tests import test_admin_browser as browser
from tests.admin_helpers import dead_lettered
from tests.test_admin_browser import seed_incident, shot

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

QUEUE_PAGE = "/admin/django_alkqueue/queuestat/queue/{}/"
#: The browser page fixture of test_admin_browser.py (Debian's Chromium through Playwright),
#: with the browser's language it depends on (English here).
page = browser.page
browser_locale = browser.browser_locale


def log_in(page, to: str = "/admin/django_alkqueue/queuestat/") -> None:
    page.goto(f"{page.base_url}/admin/login/?next={to}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#content-main")


def smtp_error(order: int) -> str:
    return (
        f"RuntimeError: smtp down for order {order}\n\nTraceback (most recent call last):\n"
        '  File "/srv/shop/consumers.py", line 12, in send_email\n'
        f"RuntimeError: smtp down for order {order}"
    )


def test_the_window_chooser_is_kept_in_the_url_from_the_overview_to_the_queue_page(page):
    seed_incident()
    log_in(page)
    page.wait_for_selector("#alk-queues")
    page.click("#alk-windows a:has-text('1 h')")
    page.wait_for_url("**window=1h**")
    assert "Last 1 h" in page.text_content("#alk-queues thead")
    assert page.inner_text("#alk-windows [aria-current]") == "1 h"
    page.click('tr[data-queue="shop-emails"] td:first-child a')
    page.wait_for_selector("#alk-chart-throughput")
    assert page.url.endswith("?window=1h")
    assert page.inner_text("#alk-windows [aria-current]") == "1 h"
    assert "per 1 min" in page.inner_text("#alk-chart-throughput figcaption")
    page.click("#alk-windows a:has-text('7 d')")
    page.wait_for_url("**window=7d**")
    assert "per 1 h" in page.inner_text("#alk-chart-throughput figcaption")
    shot(page, "queue-7d")


def test_every_bucket_of_a_chart_has_a_tooltip(page):
    seed_incident()
    log_in(page, QUEUE_PAGE.format("shop-emails") + "?window=1h")
    tips = page.locator("#alk-chart-throughput rect.alk-chart-hover title")
    assert tips.count() == 60
    last = tips.nth(59).text_content()
    assert " to " in last and "finished " in last and "failed " in last
    box = page.locator("#alk-chart-throughput rect.alk-chart-hover").nth(59).bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 50


def test_a_series_with_a_single_bucket_is_visible(page):
    seed_incident()
    QueueStat.objects.create(queue="shop-ledger", minute=minute_of(timezone.now()), pending=3)
    log_in(page, QUEUE_PAGE.format("shop-ledger") + "?window=1h")
    dot = page.locator("#alk-chart-depth circle.alk-pending")
    assert dot.count() == 1 and dot.is_visible()
    box = dot.bounding_box()
    assert box is not None and box["width"] >= 4
    assert "now 3, at most 3" in page.inner_text("#alk-chart-depth figcaption")
    shot(page, "queue-one-bucket")


def test_the_charts_follow_the_dark_theme_and_fit_at_200_percent_zoom(page):
    seed_incident()
    log_in(page, QUEUE_PAGE.format("shop-emails"))
    fill = "getComputedStyle(document.querySelector('#alk-chart-depth .alk-chart-text')).fill"
    light = page.evaluate(fill)
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    dark = page.evaluate(fill)
    assert light != dark  # the admin's --body-quiet-color of each theme
    shot(page, "queue-dark")
    # 200% zoom of a 1440 px window: 720 CSS pixels wide.
    page.set_viewport_size({"width": 720, "height": 900})
    right = "document.querySelector('#alk-chart-depth svg').getBoundingClientRect().right"
    assert page.evaluate(right) <= 720
    assert page.evaluate("document.querySelector('.alk-charts').scrollWidth") <= 720


def test_an_error_group_links_to_exactly_its_dead_letters_and_requeues_them(page):
    seed_incident()
    mine = {dead_lettered("shop-emails", {"order": n}, smtp_error(n)) for n in (151, 137, 12)}
    other = dead_lettered("shop-emails", {"order": 1}, "ValueError: bad address")
    log_in(page, QUEUE_PAGE.format("shop-emails"))
    group = page.locator("#alk-errors tbody tr").first
    assert "RuntimeError: smtp down for order <num>" in group.inner_text()
    assert "consumers.py in send_email" in group.inner_text()
    assert group.locator("td.num").inner_text() == "3"
    shot(page, "queue-error-groups")

    group.locator("a.alk-error-link").click()
    page.wait_for_selector("#result_list")
    assert {int(c) for c in page.locator("#result_list td.field-job_id").all_inner_texts()} == mine
    assert "RuntimeError: smtp down for order <num>" in page.inner_text("#changelist-filter")
    page.go_back()

    page.locator("#alk-errors tbody tr").first.locator(".alk-requeue-group button").click()
    page.wait_for_selector("#alk-confirm-count")
    assert page.inner_text("#alk-confirm-count strong") == "3"
    assert "error group = RuntimeError: smtp down for order <num>" in page.inner_text("#content")
    shot(page, "requeue-error-group")
    page.click("#content form [type=submit]")
    page.wait_for_selector(".messagelist")
    assert "Requeued 3 dead letters" in page.inner_text(".messagelist")
    assert set(QueueMessage.objects.filter(id__in=mine).values_list("id", flat=True)) == mine
    left = DeadLetter.objects.filter(queue="shop-emails").values_list("job_id", flat=True)
    assert set(left) == {other}


def test_the_error_groups_page_lists_groups_across_queues(page):
    seed_incident()
    dead_lettered("shop-emails", {}, smtp_error(3))
    dead_lettered("shop-reports", {}, smtp_error(4))
    log_in(page)
    page.click("#alk-errors-link")
    page.wait_for_selector("#alk-errors")
    rows = page.locator("#alk-errors tbody tr")
    texts = rows.all_inner_texts()
    smtp = next(t for t in texts if "smtp down" in t)
    assert "shop-emails, shop-reports" in smtp or "shop-reports, shop-emails" in smtp
    shot(page, "error-groups")
