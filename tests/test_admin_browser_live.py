"""Live pages in a real browser (issue 37): live.js fetches the page every 5 s and swaps its
tables and charts, keeping the scroll position and the ticked checkboxes; pausing stops it.
The browser's clock is Playwright's (page.clock), so a test moves time instead of waiting 5 s;
the fetches themselves are real requests to the live server.

Runs on every database: nothing here needs a worker process (PostgreSQL, MariaDB, SQLite's
shared in-memory test database).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from django_alkqueue import queue
from django_alkqueue.models import QueueMessage
from tests import test_admin_browser as browser
from tests.admin_helpers import JOBS, OVERVIEW, make_user
from tests.test_admin_browser import shot

pytestmark = [pytest.mark.django_db(transaction=True)]

page = browser.page
browser_locale = browser.browser_locale
#: One tick of live.js (admin.base.LIVE_SECONDS), in the browser's clock.
TICK_MS = 5_000


def open_live(page, path: str, height: int = 500) -> None:
    """Log in and open `path`, then stop the browser's clock: from here on only the test moves
    it. The jump to the stopped time runs one update, waited for here."""
    make_user("admin", superuser=True)
    page.set_viewport_size({"width": 1280, "height": height})
    page.clock.install()
    page.goto(f"{page.base_url}/admin/login/?next={path}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#alk-live-control:not([hidden])")
    page.clock.pause_at(datetime.now() + timedelta(hours=1))
    page.wait_for_selector("#alk-live-control:has-text('Updated at')")


def fetches_of(page) -> list[str]:
    """The live updates' requests from now on: fetches of the page's own URL."""
    seen: list[str] = []
    page.on("request", lambda r: r.resource_type == "fetch" and seen.append(r.url))
    return seen


def row_of(job_id: int) -> str:
    return f'#result_list input.action-select[value="{job_id}"]'


def test_a_job_enqueued_after_the_page_loaded_appears_on_the_job_list(page):
    queue("shop-emails").enqueue_many([{"n": n} for n in range(3)])
    open_live(page, JOBS)
    job = queue("shop-emails").enqueue({"n": "new"})
    assert page.locator(row_of(job.id)).count() == 0
    page.clock.run_for(TICK_MS)
    page.wait_for_selector(row_of(job.id))
    assert page.inner_text("#alk-search-count") == page.inner_text("#alk-result-count")


def test_an_empty_job_list_shows_the_first_job_enqueued(page):
    open_live(page, JOBS)
    assert page.locator("#result_list").count() == 0
    job = queue("shop-emails").enqueue({"n": "first"})
    page.clock.run_for(TICK_MS)
    page.wait_for_selector(row_of(job.id))


def test_a_live_update_keeps_the_scroll_position_and_the_ticked_checkbox(page):
    jobs = queue("shop-emails").enqueue_many([{"n": n} for n in range(40)])
    open_live(page, JOBS)
    ticked = jobs[5].id
    page.check(row_of(ticked))
    page.evaluate("window.scrollTo(0, 600)")
    before = page.evaluate("window.scrollY")
    assert before > 0
    job = queue("shop-emails").enqueue({"n": "new"})
    page.clock.run_for(TICK_MS)
    page.wait_for_selector(row_of(job.id))
    assert page.evaluate("window.scrollY") == before
    assert page.is_checked(row_of(ticked))
    assert page.inner_text(".action-counter") == "1 of 41 selected"
    shot(page, "jobs-live")


def test_the_overview_figures_follow_the_queue(page):
    queue("shop-emails").enqueue_many([{"n": n} for n in range(2)])
    open_live(page, OVERVIEW, height=900)
    pending = 'tr[data-queue="shop-emails"] td[data-figure="pending"]'
    assert page.inner_text(pending) == "2"
    queue("shop-emails").enqueue({"n": "new"})
    page.clock.run_for(TICK_MS)
    page.wait_for_function(f"document.querySelector('{pending}').innerText.trim() === '3'")


def test_pausing_stops_the_live_updates_until_resumed(page):
    queue("shop-emails").enqueue({"n": 0})
    open_live(page, JOBS)
    page.click("#alk-live-control button")
    assert page.inner_text("#alk-live-control button") == "Resume live updates"
    fetched = fetches_of(page)
    job = queue("shop-emails").enqueue({"n": "new"})
    page.clock.run_for(3 * TICK_MS)
    assert page.locator(row_of(job.id)).count() == 0
    page.click("#alk-live-control button")  # resume: one update at once
    page.wait_for_selector(row_of(job.id))
    assert len(fetched) == 1
    assert QueueMessage.objects.filter(pk=job.id).exists()
