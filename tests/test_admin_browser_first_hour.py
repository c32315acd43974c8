"""The first hour in a real browser (issue 37): before any worker has started, a queue whose
`@consumer` exists in code shows its handler with "no worker has served it yet" in amber, on
the overview and on its queue page, not the red "no consumer"; and the overview says that no
worker is running in neutral words, not the red "no live leader". Fixtures as in
test_admin_browser.py; the colours are the ones the browser computes from admin.css.

Runs on every database: nothing here needs a worker process.
"""

from __future__ import annotations

import pytest

from django_alkqueue import queue
from tests import test_admin_browser as browser
from tests.admin_helpers import OVERVIEW, make_user, queue_url
from tests.test_admin_browser import shot

pytestmark = [pytest.mark.django_db(transaction=True)]

page = browser.page
browser_locale = browser.browser_locale
#: admin.css: .alk-amber's text and .alk-notice's border (not yet running), .alk-warn's red.
AMBER_TEXT = "rgb(138, 90, 0)"
AMBER_BORDER = "rgb(201, 138, 0)"
RED = "rgb(186, 33, 33)"


def open_as_new_operator(page, path: str) -> None:
    """A view enqueued a job before any worker started; the operator opens `path`."""
    queue("shop-reports").enqueue({"kind": "daily"})
    make_user("admin", superuser=True)
    page.goto(f"{page.base_url}/admin/login/?next={path}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#content-main")


def colour(locator, prop: str = "color") -> str:
    return str(locator.evaluate(f"e => getComputedStyle(e).{prop}"))


def test_the_overview_shows_an_unserved_queues_code_handler_in_amber(page):
    open_as_new_operator(page, OVERVIEW)
    cell = page.locator('tr[data-queue="shop-reports"] .alk-consumer')
    shot(page, "first-hour-overview")

    assert cell.locator("span[title='testproject.shop.consumers.build_report']").is_visible()
    note = cell.locator(".alk-amber")
    assert note.inner_text() == "no worker has served it yet"
    assert note.is_visible() and colour(note) == AMBER_TEXT
    assert "no consumer" not in cell.inner_text()


def test_the_queue_page_shows_an_unserved_queues_code_handler_and_an_amber_notice(page):
    open_as_new_operator(page, queue_url("shop-reports"))
    shot(page, "first-hour-queue")

    assert page.inner_text("#alk-consumer") == "Handler\ttestproject.shop.consumers.build_report"
    notice = page.locator(".alk-notice", has_text="No worker has served this queue yet")
    assert notice.is_visible() and colour(notice, "borderLeftColor") == AMBER_BORDER
    assert "manage.py alk_worker --queue shop-reports" in notice.inner_text()
    assert page.locator(".alk-warning").count() == 0
    assert "No consumer is bound" not in page.inner_text("#content-main")


def test_with_no_worker_at_all_the_overview_says_so_in_neutral_words(page):
    open_as_new_operator(page, OVERVIEW)
    workers = page.locator("#alk-workers")

    assert "No worker is running: the last one exited, or none has started." in (
        workers.inner_text()
    )
    assert "manage.py alk_worker" in workers.inner_text()
    assert workers.locator(".alk-warn").count() == 0
    assert colour(workers) != RED
    assert "no live leader" not in page.inner_text("#content-main")
