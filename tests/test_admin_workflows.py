"""The admin's view of workflows (docs/admin.md, "Workflows"): waiting jobs shown as such in
the job list, its state filter and the overview; the Batches list and page; the Workflow
panel of a job's page with its dependencies, dependents and batch; and the graph of a small
workflow drawn as SVG, every text in it escaped."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_alkqueue import batch, chain, queue
from django_alkqueue.admin.workflow_panel import GRAPH_LIMIT
from django_alkqueue.models import Batch, BatchCounts, DeadLetter, QueueMessage
from tests.admin_helpers import ADMIN, DEAD, JOBS, OVERVIEW, client_for, dead_lettered, make_user

pytestmark = pytest.mark.django_db


def ids_on(client, url: str) -> list[int]:
    response = client.get(url)
    assert response.status_code == 200, url
    return [row.pk for row in response.context["cl"].result_list]


def queries_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return [q["sql"] for q in captured.captured_queries]


# -- waiting, shown as such everywhere -------------------------------------------------------


def test_the_job_list_shows_a_waiting_job_with_the_waiting_badge(root):
    first = queue("shop-emails").enqueue({})
    waiting = queue("shop-emails").enqueue({}, after=[first])

    html = root.get(JOBS).content.decode()

    assert waiting.state == "waiting"
    assert '<span class="alk-state alk-waiting">waiting</span>' in html


def test_a_waiting_job_runs_when_its_dependencies_are_done_not_in_the_year_9000(root):
    first = queue("shop-emails").enqueue({})
    waiting = queue("shop-emails").enqueue({}, after=[first])

    listed = root.get(JOBS).content.decode()
    page = root.get(f"{JOBS}{waiting.id}/change/").content.decode()

    for html in (listed, page):
        assert "when its dependencies are done" in html
        assert "9000" not in html


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


# -- batches ---------------------------------------------------------------------------------

BATCHES = f"{ADMIN}/batch/"
FINISHED = f"{ADMIN}/finishedjob/"


def nightly_batch(members: int = 3) -> tuple[Batch, list[int]]:
    """A sealed batch "nightly" of `members` shop-emails jobs, with both callbacks."""
    with batch(
        on_success=queue("reports").job({"report": 7}),
        on_finish=queue("audit").job({"batch": "nightly"}),
        name="nightly",
    ) as b:
        ids = [j.id for j in queue("shop-emails").enqueue_many([{"n": n} for n in range(members)])]
    return b, ids


def finish_all(name: str, fail: set[int] = frozenset()) -> None:  # type: ignore[assignment]
    """Claim every due job of `name` and ack it, or fail it for good if its id is in `fail`."""
    for handle in queue(name).claim("w", 100):
        if handle.job.id in fail:
            assert handle.fail("boom")
        else:
            assert handle.ack()


def test_the_batch_list_shows_name_progress_outcome_counts_and_callbacks(root):
    _b, _ids = nightly_batch(3)
    handles = queue("shop-emails").claim("w", 2)
    handles[0].ack()
    handles[1].fail("boom")

    response = root.get(BATCHES)
    html = response.content.decode()
    row = response.context["cl"].result_list[0]

    assert row.alk_counts == BatchCounts(total=3, succeeded=1, dead=1, cancelled=0, pending=1)
    assert "nightly" in html
    assert '<progress value="2" max="3"></progress> 2/3' in html
    assert "reports" in html and "audit" in html
    assert "not fired yet" in html


def test_a_fired_batch_links_each_callback_to_the_job_it_enqueued(root):
    b, _ids = nightly_batch(2)
    finish_all("shop-emails")
    b.refresh_from_db()

    html = root.get(BATCHES).content.decode()

    assert b.fired_at is not None
    for job_id in (b.success_job_id, b.finish_job_id):
        assert f'href="{JOBS}{job_id}/change/">fired: job {job_id} (pending)</a>' in html


@pytest.mark.parametrize("page", ["list", "page"])
def test_a_fired_batch_shows_its_status_as_a_rendered_time_not_escaped_html(root, page):
    b, _ids = nightly_batch(1)
    finish_all("shop-emails")
    url = BATCHES if page == "list" else f"{BATCHES}{b.id}/change/"

    html = root.get(url).content.decode()

    assert re.search(r"fired <time datetime=\"[^\"]+\" title=\"[^\"]+\">[^<]+ ago</time>", html)
    assert "&lt;time" not in html


def test_on_success_is_shown_as_not_enqueued_when_a_member_died(root):
    b, ids = nightly_batch(2)
    finish_all("shop-emails", fail={ids[0]})

    html = root.get(f"{BATCHES}{b.id}/change/").content.decode()

    assert "not enqueued" in html
    assert "1 succeeded, 1 dead, 0 cancelled, 0 not finished" in html


def test_the_batch_page_links_its_members_in_the_job_dead_letter_and_finished_lists(root):
    b, _ids = nightly_batch(2)

    html = root.get(f"{BATCHES}{b.id}/change/").content.decode()

    assert f'href="{JOBS}?batch={b.id}"' in html
    assert f'href="{DEAD}?batch={b.id}"' in html
    assert f'href="{FINISHED}?batch={b.id}"' in html


def test_the_batch_filter_lists_only_the_members_of_the_batch(root):
    b, ids = nightly_batch(3)
    queue("shop-emails").enqueue({"other": True})

    assert sorted(ids_on(root, f"{JOBS}?batch={b.id}")) == ids


def test_the_batch_filter_on_dead_letters_lists_the_members_that_died(root):
    b, ids = nightly_batch(2)
    finish_all("shop-emails", fail={ids[1]})
    dead_lettered("shop-emails", {}, "other")

    response = root.get(f"{DEAD}?batch={b.id}")

    assert [d.job_id for d in response.context["cl"].result_list] == [ids[1]]


@override_settings(ALKQUEUE={"QUEUES": {"shop-emails": {"keep": 60}}})
def test_the_batch_filter_on_finished_jobs_lists_the_kept_members(root):
    b, ids = nightly_batch(2)
    finish_all("shop-emails")

    response = root.get(f"{FINISHED}?batch={b.id}")

    assert sorted(r.job_id for r in response.context["cl"].result_list) == ids


@pytest.mark.parametrize("value", ["x", "99999999999999999999999", "-"])
def test_a_batch_filter_that_is_no_id_matches_nothing(root, value):
    nightly_batch(1)

    assert ids_on(root, f"{JOBS}?batch={value}") == []


def test_the_batch_list_makes_the_same_queries_for_two_batches_as_for_twenty(root):
    nightly_batch(2)
    finish_all("shop-emails")
    before = len(queries_of(root, BATCHES))
    for _ in range(19):
        nightly_batch(2)
        finish_all("shop-emails")

    assert len(queries_of(root, BATCHES)) == before


def test_a_view_only_user_sees_the_batches_but_no_list_they_may_not_open():
    b, _ids = nightly_batch(1)
    viewer = client_for(make_user("viewer", "view_batch", "view_queuemessage"))

    html = viewer.get(f"{BATCHES}{b.id}/change/").content.decode()

    assert f'href="{JOBS}?batch={b.id}"' in html
    assert f'href="{DEAD}?batch={b.id}"' not in html


# -- the Workflow panel and the graph --------------------------------------------------------


def job_page(job_id: int) -> str:
    return f"{JOBS}{job_id}/change/"


def test_a_job_in_no_workflow_has_no_panel(root):
    job = queue("shop-emails").enqueue({})

    html = root.get(job_page(job.id)).content.decode()

    assert 'id="alk-workflow"' not in html


def test_the_panel_lists_dependencies_and_dependents_with_links_and_states(root):
    export = queue("exports").enqueue({})
    mail = queue("emails").enqueue({}, after=[export])
    audit = queue("audit").enqueue({}, after=[mail])

    response = root.get(job_page(mail.id))
    html = response.content.decode()
    dependencies = html.split('id="alk-workflow-dependencies"')[1].split(
        'id="alk-workflow-dependents"'
    )[0]
    dependents = html.split('id="alk-workflow-dependents"')[1].split('id="alk-workflow-graph"')[0]

    assert f'<a href="{job_page(export.id)}">job {export.id}</a>' in dependencies
    assert "(exports)" in dependencies and "alk-state alk-pending" in dependencies
    assert f'<a href="{job_page(audit.id)}">job {audit.id}</a>' in dependents
    assert "(audit)" in dependents and "alk-state alk-waiting" in dependents


def test_a_dependency_that_succeeded_and_left_no_row_is_shown_as_succeeded(root):
    export = queue("exports").enqueue({})
    mail = queue("emails").enqueue({}, after=[export])
    finish_all("exports")

    html = root.get(job_page(mail.id)).content.decode()

    assert f'data-job="{export.id}">job {export.id}' in html.replace("\n", "").replace("  ", "")
    assert "alk-state alk-succeeded" in html


def test_the_dead_letter_page_of_a_job_that_died_for_its_dependency_shows_the_panel(root):
    export = queue("exports").enqueue({})
    mail = queue("emails").enqueue({}, after=[export])
    finish_all("exports", fail={export.id})
    dead = DeadLetter.objects.get(job_id=mail.id)
    dead_export = DeadLetter.objects.get(job_id=export.id)

    html = root.get(f"{DEAD}{dead.pk}/change/").content.decode()

    assert 'id="alk-workflow"' in html
    assert f'href="{DEAD}{dead_export.pk}/change/"' in html


def test_the_panel_links_the_batch_of_a_member(root):
    b, ids = nightly_batch(2)

    html = root.get(job_page(ids[0])).content.decode()

    assert f'<a href="{BATCHES}{b.id}/change/">nightly #{b.id}</a>' in html
    assert "not finished yet" in html


def test_a_small_workflow_is_drawn_as_svg_with_a_link_and_a_colour_per_job(root):
    a, b, c = chain(queue("fetch").job({}), queue("parse").job({}), queue("load").job({}))

    html = root.get(job_page(b.id)).content.decode()
    (svg,) = re.findall(r'<svg class="alk-graph".*?</svg>', html, re.S)

    assert svg.count("<rect") == 3
    assert svg.count('<path class="alk-edge') == 2
    for job in (a, b, c):
        assert f'<a href="{job_page(job.id)}"><g class="alk-node alk-node-' in svg
    assert f'class="alk-node alk-node-pending" data-job="{a.id}"' in svg
    assert f'class="alk-node alk-node-waiting alk-node-current" data-job="{b.id}"' in svg
    assert "<script" not in html.split('id="alk-workflow"')[1].split("</fieldset>")[0]
    assert 'class="alk-swatch alk-node-waiting"' in html


def test_a_workflow_of_more_than_fifty_jobs_is_not_drawn_and_the_page_says_why(root):
    first = queue("fan").enqueue({})
    queue("fan").enqueue_many([{}] * GRAPH_LIMIT, after=[first])

    html = root.get(job_page(first.id)).content.decode()

    assert "alk-graph" not in html
    assert f"too large to draw: at least {GRAPH_LIMIT + 1} jobs" in html


def test_a_workflow_of_exactly_fifty_jobs_is_drawn(root):
    first = queue("fan").enqueue({})
    queue("fan").enqueue_many([{}] * (GRAPH_LIMIT - 1), after=[first])

    html = root.get(job_page(first.id)).content.decode()

    assert html.count('<g class="alk-node') == GRAPH_LIMIT


HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def test_a_hostile_queue_name_and_payload_are_escaped_in_the_panel_and_the_graph(root):
    export = queue("exports").enqueue({"x": HOSTILE})
    mail = queue("emails").enqueue({"y": HOSTILE}, after=[export])
    # The API refuses such a name; a row written by hand or by an older version may hold it.
    QueueMessage.objects.filter(id=export.id).update(queue=HOSTILE)

    html = root.get(job_page(mail.id)).content.decode()
    panel = html.split('id="alk-workflow"')[1].split("</fieldset>")[0]

    assert "<script" not in panel and "<img" not in panel
    assert "&lt;script&gt;" in panel
    assert HOSTILE not in html


def test_a_job_page_in_a_workflow_makes_a_bounded_number_of_queries(root):
    a, _b, _c = chain(queue("fetch").job({}), queue("parse").job({}), queue("load").job({}))
    few = len(queries_of(root, job_page(a.id)))
    first = queue("fan").enqueue({})
    queue("fan").enqueue_many([{}] * 200, after=[first])

    # One query per step outwards (3 for the chain: 2 steps and the last, empty), 3 standings.
    assert len(queries_of(root, job_page(first.id))) <= few
