"""The admin's view of workflows (docs/admin.md, "Workflows"): waiting jobs shown as such in
the job list, its state filter and the overview; the Batches list and page; the Workflow
panel of a job's page with its dependencies, dependents and batch; and the graph of a small
workflow drawn as SVG, every text in it escaped."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_alkqueue import batch, queue
from django_alkqueue.models import Batch, BatchCounts
from tests.admin_helpers import ADMIN, DEAD, JOBS, OVERVIEW, bury, client_for, make_user

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
    bury("shop-emails", {}, "other")

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
