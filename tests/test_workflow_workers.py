"""Workflows under real worker processes (issue 36): dependencies run in order across queues,
a failure fails its dependents and a requeue brings them back, a chain of 100 runs in order,
an empty batch fires and a rolled-back one leaves nothing,
and a batch's callbacks are enqueued exactly once however its last members finish."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.db import connection, transaction

from django_alkqueue import batch, chain, queue
from django_alkqueue.models import Batch, DeadLetter, QueueMessage
from django_alkqueue.workflows.dependencies import DEPENDENCY_FAILED
from tests.conftest import wait_until
from tests.workers import Watched, start_worker, stop
from tests.workflow_consumers import QUEUES, WORKFLOW_FIXED, WORKFLOW_RUNS

pytestmark = pytest.mark.django_db(transaction=True)

SQLITE = connection.vendor == "sqlite"


@pytest.fixture(autouse=True)
def runs_table() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {WORKFLOW_RUNS} (job_id BIGINT, queue VARCHAR(100), "
            "payload VARCHAR(1000), ran_at DOUBLE PRECISION)"
        )
        cursor.execute(f"CREATE TABLE {WORKFLOW_FIXED} (fixed VARCHAR(100))")
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {WORKFLOW_RUNS}")
        cursor.execute(f"DROP TABLE {WORKFLOW_FIXED}")


@pytest.fixture
def workers() -> Iterator[list[Watched]]:
    """Worker processes serving every workflow queue: 2 on SQLite, else 3, of 4 threads."""
    env = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.workflow_consumers"}
    args = [arg for name in QUEUES for arg in ("--queue", name)]
    started = [
        Watched(start_worker(*args, "--concurrency", "4", "--poll-interval", "0.2", env=env))
        for _ in range(2 if SQLITE else 3)
    ]
    yield started
    for worker in started:
        stop(worker.process)


def ran() -> dict[int, float]:
    """job id -> when it ran."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, ran_at FROM {WORKFLOW_RUNS}")
        return {int(job_id): float(at) for job_id, at in cursor.fetchall()}


def payloads_ran(name: str) -> list[object]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT payload FROM {WORKFLOW_RUNS} WHERE queue = %s", [name])
        return [json.loads(text) for (text,) in cursor.fetchall()]


def wait_for_runs(count: int, timeout: float = 120) -> dict[int, float]:
    wait_until(lambda: len(ran()) >= count, timeout=timeout, every=0.1, what=f"{count} runs")
    return ran()


def test_a_diamond_across_queues_runs_in_dependency_order(workers):
    top = queue("wf-a").enqueue({"step": "top"})
    left = queue("wf-b").enqueue({"step": "left"}, after=[top])
    right = queue("wf-c").enqueue({"step": "right"}, after=[top])
    bottom = queue("wf-a").enqueue({"step": "bottom"}, after=[left, right])
    at = wait_for_runs(4)
    assert at[top.id] < at[left.id] and at[top.id] < at[right.id]
    assert max(at[left.id], at[right.id]) < at[bottom.id]


def test_a_chain_of_100_across_queues_runs_in_order(workers):
    names = ("wf-a", "wf-b", "wf-c")
    jobs = chain(*(queue(names[i % 3]).job({"i": i}) for i in range(100)))
    at = wait_for_runs(100, timeout=180)
    order = sorted(at, key=at.__getitem__)
    assert order == [job.id for job in jobs]


def test_a_failure_fails_the_dependents_and_its_requeue_runs_them(workers):
    first = queue("wf-a").enqueue({"fail": "first"})
    second = queue("wf-b").enqueue({"step": 2}, after=[first])
    third = queue("wf-c").enqueue({"step": 3}, after=[second])
    wait_until(lambda: DeadLetter.objects.count() == 3, timeout=60, what="three dead letters")
    reasons = dict(DeadLetter.objects.values_list("job_id", "reason"))
    assert reasons[second.id] == reasons[third.id] == DEPENDENCY_FAILED
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {WORKFLOW_FIXED} (fixed) VALUES ('first')")
    assert queue("wf-a").requeue(first.id) is not None
    at = wait_for_runs(3)
    assert at[first.id] < at[second.id] < at[third.id]
    assert not DeadLetter.objects.exists()


def test_a_batch_s_callbacks_are_enqueued_exactly_once_under_many_workers(workers):
    rounds, members = (4, 40) if SQLITE else (8, 60)
    ids = []
    for _ in range(rounds):
        with batch(
            on_success=queue("wf-callback").job({"kind": "success"}),
            on_finish=queue("wf-callback").job({"kind": "finish"}),
        ) as b:
            queue("wf-a").enqueue_many([{"i": i} for i in range(members // 2)])
            queue("wf-b").enqueue_many([{"i": i} for i in range(members // 2)])
        ids.append(b.id)
    wait_for_runs(rounds * (members + 2), timeout=180)
    wait_until(lambda: not QueueMessage.objects.exists(), timeout=30, what="an empty queue")
    callbacks = payloads_ran("wf-callback")
    for batch_id in ids:
        fired = sorted(p["kind"] for p in callbacks if p["_alkqueue"]["batch"] == batch_id)
        assert fired == ["finish", "success"], batch_id
        assert Batch.objects.get(pk=batch_id).counts().succeeded == members


def test_an_empty_batch_s_callback_runs_and_a_rolled_back_batch_leaves_nothing_to_run(workers):
    with pytest.raises(RuntimeError), transaction.atomic():
        with batch(on_finish=queue("wf-callback").job({"kind": "rolled back"})):
            queue("wf-a").enqueue_many([{"i": i} for i in range(5)])
        raise RuntimeError("the caller's transaction rolls back")
    with batch(on_finish=queue("wf-callback").job({"kind": "empty"})) as empty:
        pass
    wait_for_runs(1)
    [callback] = payloads_ran("wf-callback")
    assert callback == {"kind": "empty", "_alkqueue": {"batch": empty.id}}
    assert not Batch.objects.exclude(pk=empty.id).exists()
    assert payloads_ran("wf-a") == []
