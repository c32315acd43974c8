"""The admin's view of workflows (docs/admin.md, "Workflows"): waiting jobs shown as such in
the job list, its state filter and the overview; the Batches list and page; the Workflow
panel of a job's page with its dependencies, dependents and batch; and the graph of a small
workflow drawn as SVG, every text in it escaped."""

from __future__ import annotations

import pytest

from django_alkqueue import queue
from tests.admin_helpers import JOBS, OVERVIEW

pytestmark = pytest.mark.django_db


def ids_on(client, url: str) -> list[int]:
    response = client.get(url)
    assert response.status_code == 200, url
    return [row.pk for row in response.context["cl"].result_list]


# -- waiting, shown as such everywhere -------------------------------------------------------


def test_the_job_list_shows_a_waiting_job_with_the_waiting_badge(root):
    first = queue("shop-emails").enqueue({})
    waiting = queue("shop-emails").enqueue({}, after=[first])

    html = root.get(JOBS).content.decode()

    assert waiting.state == "waiting"
    assert '<span class="alk-state alk-waiting">waiting</span>' in html


def test_the_state_filter_offers_waiting_and_lists_only_waiting_jobs(root):
    first = queue("shop-emails").enqueue({})
    waiting = queue("shop-emails").enqueue({}, after=[first])
    queue("shop-emails").enqueue({}, delay=3600)

    assert "?state=waiting" in root.get(JOBS).content.decode()
    assert ids_on(root, f"{JOBS}?state=waiting") == [waiting.id]


def test_a_waiting_job_is_not_listed_as_scheduled(root):
    first = queue("shop-emails").enqueue({})
    queue("shop-emails").enqueue({}, after=[first])
    scheduled = queue("shop-emails").enqueue({}, delay=3600)

    assert ids_on(root, f"{JOBS}?state=scheduled") == [scheduled.id]


def test_the_overview_counts_waiting_jobs_per_queue_and_links_them(root):
    first = queue("shop-emails").enqueue({})
    queue("shop-emails").enqueue_many([{}, {}], after=[first])
    queue("shop-emails").enqueue({}, delay=3600)

    response = root.get(OVERVIEW)
    (row,) = [r for r in response.context["rows"] if r.figures.queue == "shop-emails"]
    html = response.content.decode()

    assert (row.figures.scheduled, row.figures.waiting) == (1, 2)
    assert response.context["totals"]["waiting"] == 2
    assert f"{JOBS}?queue=shop-emails&amp;state=waiting" in html


def test_the_queue_page_of_a_queue_with_only_waiting_jobs_shows_them(root):
    first = queue("shop-emails").enqueue({})
    queue("shop-reports").enqueue({}, after=[first])

    response = root.get(f"{OVERVIEW}queue/shop-reports/")

    assert response.status_code == 200
    assert response.context["figures"].waiting == 1
