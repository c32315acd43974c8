"""The overview in a real browser at the widths an operator has (issue 37): a 1280 px laptop
window without horizontal scrolling, and a 390 px phone during an incident, where the page
does not scroll sideways either (the queue table scrolls inside its own box). With data in
every table: the incident of test_admin_browser.py.

Runs on every database: nothing here needs a worker process.
"""

from __future__ import annotations

import pytest

from tests import test_admin_browser as browser
from tests.admin_helpers import OVERVIEW, queue_url
from tests.test_admin_browser import seed_incident, shot

pytestmark = [pytest.mark.django_db(transaction=True)]

page = browser.page
browser_locale = browser.browser_locale
OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def open_at(page, path: str, width: int) -> None:
    seed_incident()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{page.base_url}/admin/login/?next={path}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#alk-queues tbody tr")


def test_the_overview_fits_a_1280_px_window(page):
    open_at(page, OVERVIEW, 1280)
    shot(page, "overview-1280")
    assert page.evaluate(OVERFLOW) <= 0
    chart = page.locator('tr[data-queue="shop-emails"] svg.alk-chart').bounding_box()
    assert chart is not None and chart["x"] + chart["width"] <= 1280


def test_the_overview_does_not_scroll_sideways_at_390_px(page):
    open_at(page, OVERVIEW, 390)
    shot(page, "overview-390")
    assert page.evaluate(OVERFLOW) <= 0
    assert page.locator("#alk-live-control button").is_visible()


def test_a_queue_page_does_not_scroll_sideways_at_390_px(page):
    open_at(page, OVERVIEW, 390)
    page.goto(f"{page.base_url}{queue_url('shop-webhooks')}")
    page.wait_for_selector("#alk-errors")
    shot(page, "queue-390")
    assert page.evaluate(OVERFLOW) <= 0
