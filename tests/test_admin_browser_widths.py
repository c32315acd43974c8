"""The overview in a real browser at the widths an operator has (issue 37): a 1280 px laptop
window without horizontal scrolling, and a 390 px phone during an incident, where the page
does not scroll sideways either (the queue table scrolls inside its own box). With data in
every table: the incident of test_admin_browser.py.

Runs on every database: nothing here needs a worker process.
"""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from tests import test_admin_browser as browser
from tests.admin_helpers import JOBS, OVERVIEW, queue_url
from tests.test_admin_browser import ARTIFACTS, seed_incident, shot, shot_element

pytestmark = [pytest.mark.django_db(transaction=True)]

page = browser.page
browser_locale = browser.browser_locale
OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def open_at(page, path: str, width: int, ready: str = "#alk-queues tbody tr") -> None:
    seed_incident()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{page.base_url}/admin/login/?next={path}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector(ready)


def test_the_overview_fits_a_1280_px_window(page):
    open_at(page, OVERVIEW, 1280)
    shot(page, "overview-1280")
    assert page.evaluate(OVERFLOW) <= 0
    chart = page.locator('tr[data-queue="shop-emails"] svg.alk-chart').bounding_box()
    assert chart is not None and chart["x"] + chart["width"] <= 1280


def test_at_1280_px_each_sparkline_shows_its_scale_and_window_unclipped(page):
    open_at(page, OVERVIEW, 1280)
    table = page.locator("#alk-queues")
    table.screenshot(path=str(ARTIFACTS / "overview-queues-1280.png"))
    shot_element("overview-queues-1280")

    module = "document.getElementById('alk-queues-module')"
    assert page.evaluate(f"{module}.scrollWidth - {module}.clientWidth") <= 0
    chart = page.locator('tr[data-queue="shop-emails"] svg.alk-sparkline')
    box = chart.bounding_box()
    assert box is not None and box["width"] >= 240 and box["height"] >= 55
    labels = chart.locator("text").all_text_contents()
    assert labels[-2:] == ["24 h ago", "now"]
    assert labels[0].endswith(" jobs") and labels[1].endswith(" per 10 min")
    for text in chart.locator("text").all():
        label = text.bounding_box()
        assert label is not None and label["x"] + label["width"] <= box["x"] + box["width"] + 1


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


LONG_ERROR = (
    "SMTPServerDisconnected: Connection unexpectedly closed by mail.example.com while sending "
    "the receipt for order 151 to a customer whose address is long enough to fill a line\n\n"
    'Traceback (most recent call last):\n  File "shop/consumers.py", line 12, in send_email\n'
)


def seed_job_list() -> None:
    """A job retried after a long error, and a running job reporting its progress."""
    retried = queue("shop-emails").claim_one("web-1:4242")
    assert retried is not None and retried.retry(LONG_ERROR, delay=60)
    running = queue("shop-emails").claim_one("web-1:4242")
    assert running is not None
    QueueMessage.objects.filter(id=running.job.id).update(
        progress=json.dumps({"done": 40, "total": 100, "note": "rows"}), progress_at=timezone.now()
    )


def test_the_job_list_fits_1280_px_with_state_age_attempts_progress_and_error(page):
    open_at(page, OVERVIEW, 1280)
    seed_job_list()
    page.goto(f"{page.base_url}{JOBS}")
    page.wait_for_selector("#result_list")
    shot(page, "jobs-1280")

    assert page.evaluate(OVERFLOW) <= 0
    box = "document.querySelector('#changelist .results')"
    assert page.evaluate(f"{box}.scrollWidth - {box}.clientWidth") <= 0
    headers = [h.strip() for h in page.locator("#result_list thead th").all_inner_texts()]
    for wanted in ("STATE", "AGE", "ATTEMPTS", "PROGRESS", "LAST ERROR"):
        assert wanted in headers, headers
    # Read in one go: a live update may replace the rows between two reads of one at a time.
    right_edges = page.evaluate(
        "Array.from(document.querySelectorAll('#result_list tbody td, #result_list tbody th'))"
        ".map(cell => cell.getBoundingClientRect().right)"
    )
    assert right_edges and max(right_edges) <= 1280, right_edges
    row = page.locator("#result_list tbody tr", has_text="SMTPServerDisconnected")
    error = row.locator("td.field-error_head")
    assert error.inner_text().startswith("SMTPServerDisconnected: Connection unexpectedly")
    assert error.locator(".alk-error-head").get_attribute("title").endswith("fill a line")
    assert "Traceback" not in error.inner_text()
    assert row.locator("td.field-attempts_of").inner_text() == "1/3"
    bar = page.locator("#result_list tbody td.field-progress_bar progress")
    assert bar.count() == 1 and bar.is_visible()
