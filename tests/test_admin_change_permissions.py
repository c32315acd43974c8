"""Django's `change_*` permissions grant nothing on the queue pages, as docs/security.md says
(issue 48, defect 13): Django's admin reads "change" as including "view", so
`change_deadletter` alone opened the dead letters and their errors, and `change_queuestat`
alone the overview. Each page needs its `view_*` permission."""

from __future__ import annotations

import pytest

from django_alkqueue.models import (
    Batch,
    Consumer,
    DeadLetter,
    FinishedJob,
    PeriodicTick,
    QueueMessage,
    Worker,
)
from tests.admin_helpers import ADMIN, OVERVIEW, Seeded, client_for, make_user, queue_url

pytestmark = pytest.mark.django_db

SECRET_ERROR = "ValueError: holder Zebediah refused"
#: Each list page, by the model whose permissions guard it.
LISTS = {
    QueueMessage: f"{ADMIN}/queuemessage/",
    DeadLetter: f"{ADMIN}/deadletter/",
    FinishedJob: f"{ADMIN}/finishedjob/",
    Consumer: f"{ADMIN}/consumer/",
    Worker: f"{ADMIN}/worker/",
    PeriodicTick: f"{ADMIN}/periodictick/",
    Batch: f"{ADMIN}/batch/",
}


def codename(action: str, model: type) -> str:
    return f"{action}_{model._meta.model_name}"


@pytest.fixture
def dead_letter(seeded: Seeded) -> DeadLetter:
    dead = DeadLetter.objects.get(job_id=seeded.dead[0])
    DeadLetter.objects.filter(pk=dead.pk).update(last_error=SECRET_ERROR)
    return dead


def test_change_deadletter_alone_opens_neither_the_dead_letters_nor_their_errors(dead_letter):
    changer = client_for(make_user("changer", "change_deadletter"))

    assert changer.get(LISTS[DeadLetter]).status_code == 403
    page = changer.get(f"{LISTS[DeadLetter]}{dead_letter.pk}/change/")
    assert page.status_code == 403 and "Zebediah" not in page.content.decode()


def test_view_deadletter_opens_the_dead_letters_and_their_errors(dead_letter):
    viewer = client_for(make_user("viewer", "view_deadletter"))

    assert viewer.get(LISTS[DeadLetter]).status_code == 200
    page = viewer.get(f"{LISTS[DeadLetter]}{dead_letter.pk}/change/")
    assert page.status_code == 200 and "Zebediah" in page.content.decode()


def test_change_queuestat_alone_opens_neither_the_overview_nor_a_queue_page(seeded):
    changer = client_for(make_user("changer", "change_queuestat"))

    assert changer.get(OVERVIEW).status_code == 403
    assert changer.get(queue_url("shop-emails")).status_code == 403
    assert changer.get(f"{OVERVIEW}errors/").status_code == 403


def test_view_queuestat_opens_the_overview_and_the_queue_pages(seeded):
    viewer = client_for(make_user("viewer", "view_queuestat"))

    assert viewer.get(OVERVIEW).status_code == 200
    assert viewer.get(queue_url("shop-emails")).status_code == 200


@pytest.mark.parametrize("model", list(LISTS), ids=lambda m: m._meta.model_name)
def test_a_change_permission_alone_opens_no_list(seeded, model):
    changer = client_for(make_user("changer", codename("change", model)))
    assert changer.get(LISTS[model]).status_code == 403


@pytest.mark.parametrize("model", list(LISTS), ids=lambda m: m._meta.model_name)
def test_the_view_permission_opens_its_list(seeded, model):
    viewer = client_for(make_user("viewer", codename("view", model)))
    assert viewer.get(LISTS[model]).status_code == 200


def test_every_change_permission_together_shows_no_job_queue_section_on_the_index():
    everything = [codename("change", m) for m in LISTS] + ["change_queuestat"]
    changer = client_for(make_user("changer", *everything))

    index = changer.get("/admin/")

    assert index.status_code == 200
    assert "/admin/django_alkqueue/" not in index.content.decode()
