"""A queue's sensitivity is stored with its consumer's row (issue 48, defect 10): an admin
process that has not imported the consumer's module reads it from the Consumer table, as it
reads the consumer's limits, and masks the payloads all the same. Where this process's code
declares the consumer, the code wins."""

from __future__ import annotations

import dataclasses
import sys

import pytest
from django.test import override_settings

from django_alkqueue import queue
from django_alkqueue.consumers import ConsumerSpec, registry
from django_alkqueue.models import Consumer, DeadLetter
from django_alkqueue.privacy import is_sensitive, sensitive_queues
from django_alkqueue.worker.consumer_table import sync_consumers
from tests.admin_helpers import DEAD, JOBS, VIEW_PERMS, client_for, dead_lettered, make_user
from tests.workers import run_worker

CARD = "4111111111111111"
EMAIL = "jane@example.com"
#: The consumer module only the worker subprocess imports (ALKQUEUE_EXTRA_CONSUMERS).
CARDS_MODULE = "tests.sensitive_consumers"


def spec_of(queue_name: str, *, sensitive: bool) -> ConsumerSpec:
    emails = registry.get("shop-emails")
    assert emails is not None
    return dataclasses.replace(emails, queue=queue_name, sensitive=sensitive)


def stored_row(queue_name: str, *, sensitive: bool) -> Consumer:
    return Consumer.objects.create(queue=queue_name, handler="elsewhere.consumers.charge",
                                   lease=30, max_attempts=5, sensitive=sensitive)  # fmt: skip


@pytest.mark.django_db
def test_a_worker_writes_its_consumers_sensitivity_into_their_rows():
    sync_consumers([spec_of("cards", sensitive=True), spec_of("mails", sensitive=False)],
                   "default", takeover=False)  # fmt: skip

    stored = dict(Consumer.objects.values_list("queue", "sensitive"))
    assert stored == {"cards": True, "mails": False}


@pytest.mark.django_db
def test_a_re_sync_rewrites_the_sensitivity_the_code_now_declares():
    sync_consumers([spec_of("cards", sensitive=True)], "default", takeover=False)

    sync_consumers([spec_of("cards", sensitive=False)], "default", takeover=False)

    assert Consumer.objects.get(queue="cards").sensitive is False


@pytest.mark.django_db
def test_a_queue_sensitive_only_in_settings_is_stored_as_sensitive():
    with override_settings(ALKQUEUE={"QUEUES": {"cards": {"sensitive": True}}}):
        sync_consumers([spec_of("cards", sensitive=False)], "default", takeover=False)

    assert Consumer.objects.get(queue="cards").sensitive is True


@pytest.mark.django_db
def test_without_the_code_a_queue_is_sensitive_when_its_row_says_so():
    stored_row("cards", sensitive=True)
    stored_row("mails", sensitive=False)

    assert sensitive_queues("default") == {"cards"}
    assert is_sensitive("cards", stored=True) and not is_sensitive("mails", stored=False)


@pytest.mark.django_db
def test_where_this_process_declares_the_consumer_its_code_wins_over_the_row():
    stored_row("shop-emails", sensitive=True)  # a worker of an older release wrote it

    assert "shop-emails" not in sensitive_queues("default")
    assert not is_sensitive("shop-emails", stored=True)


@pytest.mark.django_db
def test_the_admin_masks_a_stored_sensitive_queue_whose_module_it_never_imported():
    stored_row("cards", sensitive=True)
    job_id = dead_lettered("cards", {"card": CARD}, "DeclinedError: declined")
    viewer = client_for(make_user("viewer", *VIEW_PERMS))

    for url in (f"{JOBS}?q={job_id}", f"{DEAD}{DeadLetter.objects.get(job_id=job_id).pk}/change/"):
        html = viewer.get(url).content.decode()
        assert CARD not in html, url
    assert "values are masked" in html


@pytest.mark.django_db(transaction=True)
def test_an_admin_process_without_the_consumer_module_masks_what_a_worker_marked_sensitive():
    """The worker (a subprocess) imports the sensitive consumer; this test process, which
    stands for the web process, does not: only the row it wrote says the queue is sensitive."""
    assert CARDS_MODULE not in sys.modules and registry.get("private-cards") is None
    job = queue("private-cards").enqueue({"card": CARD, "email": EMAIL}, unique_key=EMAIL)

    run_worker("--queue", "private-cards", "--burst",
               env={"ALKQUEUE_EXTRA_CONSUMERS": CARDS_MODULE})  # fmt: skip

    dead = DeadLetter.objects.get(job_id=job.id)  # both attempts failed
    viewer = client_for(make_user("viewer", *VIEW_PERMS))
    html = viewer.get(f"{DEAD}{dead.pk}/change/").content.decode()
    assert "values are masked" in html
    for secret in (CARD, EMAIL):
        assert secret not in html
    assert CARDS_MODULE not in sys.modules
