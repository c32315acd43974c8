"""Fair share under a real worker (issue 52's acceptance): one worker, `--concurrency 1
--batch 10`, drains a flooded tenant and a few small ones in turns.

`make test` runs these sized down; FAIR_SHARE_FULL=1 (set by `make chaos`) runs the issue's
sizes: A 10,000 jobs then B and C 100 each, every job of B and C done before A's 400th; A and
B 2,000 each at weights 3:1, the first 800 jobs A:B = 3:1 within 10%."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest
from django.db import connection

from django_alkqueue import queue
from django_alkqueue.models import Consumer
from tests.conftest import wait_until
from tests.fair_consumers import FAIR_RUNS, QUEUE
from tests.workers import Watched, start_worker, stop

pytestmark = pytest.mark.django_db(transaction=True)

FULL = bool(os.environ.get("FAIR_SHARE_FULL"))


@pytest.fixture(autouse=True)
def runs_table() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {FAIR_RUNS} (job_id BIGINT, tenant VARCHAR(20), ran_at BIGINT)"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {FAIR_RUNS}")


def tenants_in_run_order() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tenant FROM {FAIR_RUNS} ORDER BY ran_at")
        return [row[0] for row in cursor.fetchall()]


def drain_until(enough: int) -> list[str]:
    """One worker (--concurrency 1 --batch 10) runs until `enough` jobs ran; their tenants."""
    env = {"ALKQUEUE_EXTRA_CONSUMERS": "tests.fair_consumers"}
    worker = Watched(start_worker("--queue", QUEUE, "--concurrency", "1", "--batch", "10",
                                  "--poll-interval", "0.2", env=env))  # fmt: skip
    try:
        wait_until(lambda: len(tenants_in_run_order()) >= enough, timeout=600 if FULL else 120,
                   every=0.2, what=f"{enough} jobs ran")  # fmt: skip
    finally:
        stop(worker.process)
    return tenants_in_run_order()


def test_small_tenants_finish_before_the_flooded_one_runs_twice_their_jobs() -> None:
    flooded, few = (10_000, 100) if FULL else (1_000, 20)
    q = queue(QUEUE)
    q.enqueue_many(["A"] * flooded, fair_key="A")
    q.enqueue_many(["B"] * few, fair_key="B")
    q.enqueue_many(["C"] * few, fair_key="C")
    ran = drain_until(4 * few)
    last_small = max(i for i, tenant in enumerate(ran) if tenant != "A")
    assert Counter(ran[: last_small + 1]) == {"A": pytest.approx(few, abs=2), "B": few, "C": few}
    assert Counter(ran[:last_small])["A"] < 2 * (2 * few)  # the bound: before A's 400th


def test_weights_three_to_one_share_the_first_jobs_three_to_one() -> None:
    each, first = (2_000, 800) if FULL else (200, 80)
    Consumer.objects.create(queue=QUEUE, handler="tests.fair_consumers.record_run", lease=30,
                            max_attempts=3)  # fmt: skip
    q = queue(QUEUE)
    q.set_fair_weight("A", 3)
    q.enqueue_many(["A"] * each, fair_key="A")
    q.enqueue_many(["B"] * each, fair_key="B")
    counts = Counter(drain_until(first)[:first])
    assert counts["A"] / counts["B"] == pytest.approx(3, rel=0.1)
