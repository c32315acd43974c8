"""The Workflow panel's graph in a real browser (docs/admin.md, "Workflows"): a job's page
draws its workflow as SVG, one visible box per job, each a link to that job's page.
Fixtures and screenshots as in test_admin_browser.py.

PostgreSQL only: the live server and the test share the database.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from django_alkqueue import batch, chain, queue
from tests import test_admin_browser as browser
from tests.test_admin_browser import shot
from tests.test_admin_browser_console import log_in

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

page = browser.page
browser_locale = browser.browser_locale


def test_a_job_page_draws_its_workflow_as_a_graph_of_linked_boxes(page):
    User.objects.create_superuser("admin", "admin@example.com", "pw")
    with batch(on_finish=queue("audit").job({}), name="nightly"):
        fetch = queue("fetch").enqueue({})
    _parse, load = chain(queue("parse").job({}), queue("load").job({}))
    report = queue("reports").enqueue({}, after=[fetch, load])
    log_in(page, f"/admin/django_alkqueue/queuemessage/{report.id}/change/")

    graph = page.locator("#alk-workflow svg.alk-graph")
    graph.wait_for()
    boxes = graph.locator("g.alk-node")
    assert boxes.count() == 4
    for i in range(4):
        box = boxes.nth(i).bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 30
    assert graph.locator("path.alk-edge").count() == 3
    assert page.locator("#alk-workflow-batch").count() == 0
    shot(page, "workflow-graph")

    graph.locator(f'g.alk-node[data-job="{load.id}"]').click()
    page.wait_for_url(f"**/queuemessage/{load.id}/change/")
    assert page.locator("#alk-workflow svg.alk-graph g.alk-node-current").count() == 1


def test_a_batch_page_shows_its_progress_and_callbacks_in_the_browser(page):
    User.objects.create_superuser("admin", "admin@example.com", "pw")
    with batch(on_success=queue("audit").job({}), name="nightly import") as nightly:
        for n in range(3):
            queue("fetch").enqueue({"n": n})
    (first,) = queue("fetch").claim("w", 1)
    first.ack()
    log_in(page, f"/admin/django_alkqueue/batch/{nightly.pk}/change/")

    assert page.get_by_text("nightly import").count() >= 1
    assert page.locator(".alk-progress").first.inner_text().strip() == "1/3"
    shot(page, "workflow-batch")
