"""django_alkqueue.testing (docs/testing.md): drain(), jobs(), run_job(), RUN_ON_COMMIT and
the `alkqueue` fixture run a project's handlers in the test's thread through the worker's
own claim and outcome rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import Client

from django_alkqueue import InvalidOption, hooks, queue
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.testing import Drained, drain, jobs, run_job
from django_alkqueue.workflows import specs
from testproject.shop.models import HandlerRun
from tests.workers import run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_drain_runs_every_due_job_of_a_queue_and_acks_it():
    enqueued = queue("shop-reports").enqueue_many([{"n": n} for n in range(3)])

    assert drain("shop-reports") == Drained(succeeded=3)
    assert not QueueMessage.objects.exists()
    assert sorted(HandlerRun.objects.values_list("job_id", flat=True)) == [j.id for j in enqueued]


def test_drain_applies_the_retry_policy_until_the_job_succeeds():
    job = queue("shop-reports").enqueue({"fail_times": 2})  # constant backoff of 0 s

    assert drain("shop-reports") == Drained(succeeded=1, retried=2)
    assert HandlerRun.objects.filter(job_id=job.id).count() == 3


def test_drain_dead_letters_a_job_that_fails_for_good():
    job = queue("shop-reports").enqueue({"fail": "bad report"})

    assert drain("shop-reports") == Drained(dead=1)
    assert DeadLetter.objects.get(job_id=job.id).last_error == "bad report"


def test_drain_leaves_scheduled_jobs_alone():
    queue("shop-reports").enqueue({}, delay=3600)

    assert drain("shop-reports") == Drained()
    assert QueueMessage.objects.count() == 1


def test_drain_runs_a_batch_consumer_with_its_batches():
    queue("shop-receipts").enqueue_many([{"n": n} for n in range(120)])

    assert drain("shop-receipts").succeeded == 120


def test_drain_without_a_name_runs_every_served_queue():
    queue("shop-reports").enqueue({})
    queue("shop-webhooks").enqueue({})

    assert drain().succeeded == 2


def test_drain_refuses_a_queue_nobody_serves():
    with pytest.raises(InvalidOption, match="no @consumer or task backend"):
        drain("nobody-serves-this")


def test_jobs_lists_a_queues_live_jobs_in_handout_order():
    reports = queue("shop-reports")
    low = reports.enqueue({"n": 1})
    high = reports.enqueue({"n": 2}, priority=5)
    later = reports.enqueue({"n": 3}, delay=60)

    assert [j.id for j in jobs("shop-reports")] == [high.id, low.id, later.id]
    assert [j.state for j in jobs("shop-reports")] == ["pending", "pending", "scheduled"]


def test_run_job_runs_one_job_now_even_when_scheduled_and_leaves_the_others():
    reports = queue("shop-reports")
    first = reports.enqueue({"n": 1})
    later = reports.enqueue({"n": 2}, delay=3600)

    assert run_job(later) == Drained(succeeded=1)
    assert list(QueueMessage.objects.values_list("id", "attempts")) == [(first.id, 0)]


def test_run_job_refuses_a_job_that_is_gone():
    job = queue("shop-reports").enqueue({})
    queue("shop-reports").cancel(job.id)

    with pytest.raises(InvalidOption, match=f"no live job {job.id}"):
        run_job(job)


def test_run_on_commit_runs_a_views_job_when_its_transaction_commits(settings):
    settings.ALKQUEUE = {**settings.ALKQUEUE, "RUN_ON_COMMIT": True}

    response = Client().post("/orders/", {"email": "c@example.com"})

    job_id = response.json()["job"]
    assert HandlerRun.objects.filter(job_id=job_id).exists()
    assert not QueueMessage.objects.filter(id=job_id).exists()


def test_the_documented_run_on_commit_line_works_in_a_project_without_alkqueue(settings):
    page = (Path(__file__).resolve().parent.parent / "docs" / "testing.md").read_text()
    (line,) = [ln.strip() for ln in page.splitlines() if ln.strip().startswith("settings.ALKQUEUE")]
    del settings.ALKQUEUE

    exec(line, {"settings": settings})  # the line docs/testing.md shows, as it stands
    response = Client().post("/orders/", {"email": "c@example.com"})

    job_id = response.json()["job"]
    assert HandlerRun.objects.filter(job_id=job_id).exists()


def test_run_on_commit_runs_nothing_when_the_transaction_rolls_back(settings):
    settings.ALKQUEUE = {**settings.ALKQUEUE, "RUN_ON_COMMIT": True}

    with pytest.raises(RuntimeError), transaction.atomic():
        queue("shop-reports").enqueue({})
        raise RuntimeError("rolled back")

    assert not HandlerRun.objects.exists()


def test_the_alkqueue_fixture_drains_and_switches_run_on_commit_on(alkqueue):
    queue("shop-reports").enqueue({})
    assert alkqueue.drain("shop-reports").succeeded == 1

    with alkqueue.run_on_commit():
        job = queue("shop-reports").enqueue({})  # autocommit: runs as the statement commits

    assert HandlerRun.objects.filter(job_id=job.id).exists()
    assert alkqueue.jobs("shop-reports") == []


# -- RUN_ON_COMMIT without the pytest plugin (issue 49: the core never imports testing) ------

RUN_ON_COMMIT_IN_A_SHELL = """
import sys
light = not {"pytest", "django.test"} & set(sys.modules)
from django.db import transaction
from django.test import override_settings
from django_alkqueue import queue
from testproject.shop.models import HandlerRun
with override_settings(ALKQUEUE={"RUN_ON_COMMIT": True}):
    with transaction.atomic():
        job = queue("shop-reports").enqueue({})
print(HandlerRun.objects.filter(job_id=job.id).count(), light, "pytest" in sys.modules)
"""


def test_run_on_commit_runs_the_job_in_a_process_without_pytest_which_it_never_imports():
    # The app's ready() imports testing.py, which registers the hook the enqueue calls; the
    # fixture, and so pytest and django.test, only under pytest.
    result = run_manage("shell", "--no-imports", "-c", RUN_ON_COMMIT_IN_A_SHELL)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "True", "False"]


def test_run_on_commit_without_its_hook_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(hooks, "_run_on_commit", [])

    with pytest.raises(ImproperlyConfigured, match="INSTALLED_APPS"):
        hooks.run_on_commit([], "default")


def test_a_job_spec_sent_without_the_queue_api_s_sender_says_how_to_get_it(monkeypatch):
    spec = queue("shop-reports").job({})
    monkeypatch.setattr(specs, "_senders", [])

    with pytest.raises(ImproperlyConfigured, match="INSTALLED_APPS"):
        spec.enqueue()
    assert not QueueMessage.objects.exists()
