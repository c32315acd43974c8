"""`alk_jobs retry ID --from-step NAME`, run as a subprocess: the dead letter is requeued as
retry does, its step NAME and every step recorded after it deleted (job_actions.
requeue_from_step), audited; exit 0 done, 1 nothing matched or kept, 2 bad usage
(docs/operations.md, "alk_jobs")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import LogEntry

from django_alkqueue import queue
from django_alkqueue.models import DeadLetter, JobStep, QueueMessage
from tests.admin_helpers import dead_lettered
from tests.test_alk_jobs import alk_jobs, ok

pytestmark = pytest.mark.django_db(transaction=True)

AT = datetime(2031, 3, 10, 12, 0, tzinfo=UTC)


def with_steps(job_id: int, *names: str) -> int:
    for i, name in enumerate(names):
        at = AT + timedelta(seconds=i)
        JobStep.objects.create(
            job_id=job_id, name=name, value={"step": name}, recorded_at=at, attempt=1, duration=0.1
        )
    return job_id


def step_names(job_id: int) -> list[str]:
    rows = JobStep.objects.filter(job_id=job_id).order_by("recorded_at", "id")
    return list(rows.values_list("name", flat=True))


def test_retry_from_step_requeues_the_dead_letter_and_deletes_that_step_and_those_after():
    job = with_steps(dead_lettered("orders", {}, "Boom"), "charge", "receipt", "ship")

    out = ok("retry", str(job), "--from-step", "receipt")

    assert out.strip() == (
        f"requeued job {job} from step 'receipt': 2 steps deleted: 'receipt', 'ship'"
    )
    assert QueueMessage.objects.filter(id=job).exists()
    assert not DeadLetter.objects.filter(job_id=job).exists()
    assert step_names(job) == ["charge"]


def test_retry_from_step_writes_the_requeue_audit_entry_naming_the_step():
    job = with_steps(dead_lettered("orders", {}, "Boom"), "charge", "receipt")

    ok("requeue", str(job), "--from-step", "charge")

    entry = LogEntry.objects.order_by("-id").first()
    assert entry is not None
    assert f"from step 'charge' of job {job}: steps deleted 'charge', 'receipt'" in (
        entry.change_message
    )


def test_retry_from_step_json_says_what_went():
    job = with_steps(dead_lettered("orders", {}, "Boom"), "a", "b")

    done = json.loads(ok("retry", str(job), "--from-step", "b", "--json"))

    assert done == {"job": job, "requeued": True, "steps_deleted": ["b"], "held_by": None,
                    "gone": False}  # fmt: skip


def test_retry_from_a_step_not_recorded_exits_1_and_changes_nothing():
    job = with_steps(dead_lettered("orders", {}, "Boom"), "charge")
    entries = LogEntry.objects.count()

    result = alk_jobs("retry", str(job), "--from-step", "ship")

    assert result.returncode == 1
    assert result.stdout.strip() == f"job {job} has no recorded step 'ship'"
    assert DeadLetter.objects.filter(job_id=job).exists() and step_names(job) == ["charge"]
    assert LogEntry.objects.count() == entries


def test_retry_from_step_of_a_job_without_dead_letter_exits_1():
    result = alk_jobs("retry", "424242", "--from-step", "charge")

    assert result.returncode == 1
    assert result.stdout.strip() == "no dead letter of job 424242"


def test_retry_from_step_kept_for_its_unique_key_exits_1_and_keeps_the_steps():
    dead = queue("orders").enqueue({}, unique_key="order-1", priority=10)
    handle = queue("orders").claim_one("w")
    assert handle is not None and handle.fail("boom")
    with_steps(dead.id, "charge")
    holder = queue("orders").enqueue({}, unique_key="order-1")

    result = alk_jobs("retry", str(dead.id), "--from-step", "charge")

    assert result.returncode == 1
    assert result.stdout.strip() == (
        f"kept: a live job holds its unique key: job {dead.id} (held by job {holder.id})"
    )
    assert step_names(dead.id) == ["charge"]


@pytest.mark.parametrize("args", [
    ("--from-step", "charge"),
    ("1", "2", "--from-step", "charge"),
    ("1", "--queue", "orders", "--from-step", "charge"),
    ("1", "--limit", "1", "--from-step", "charge"),
])  # fmt: skip
def test_retry_from_step_takes_one_job_id_alone_else_exit_2(args):
    result = alk_jobs("retry", *args)

    assert result.returncode == 2
    assert result.stderr.strip() == "--from-step requeues one dead letter: give its job id alone"


def test_a_bad_step_name_is_bad_usage():
    result = alk_jobs("retry", "1", "--from-step", "")

    assert result.returncode == 2
    assert "a step name must not be empty" in result.stderr
