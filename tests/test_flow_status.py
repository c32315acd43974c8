"""flow_status: the due jobs held back right now by a cap or a rate ("throttled"), the busiest
keys (one indexed query), and `alk_status` showing them."""

from __future__ import annotations

import io
import json
import re
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_alkqueue import queue
from django_alkqueue.limits import Limits, Rate
from django_alkqueue.models import ClaimLedger, Consumer, QueueMessage
from django_alkqueue.queues import Queue
from django_alkqueue.reports import flow_status
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db

Q = "api-calls"


@pytest.fixture
def fq(make_queue) -> Queue:
    return make_queue(Q)


def limited(**limits: object) -> None:
    """The Consumer row of Q with these overrides (no code limits)."""
    stored = {name: [v.count, v.period] if isinstance(v, Rate) else v for name, v in limits.items()}
    Consumer.objects.create(queue=Q, handler="app.f", lease=30, max_attempts=3,
                            limit_overrides=stored)  # fmt: skip


def throttled(clock: FakeClock, limits: Limits) -> int:
    live = QueueMessage.objects.filter(queue=Q)
    pending = live.pending(clock()).count()
    claimed = live.claimed().count()
    return flow_status.throttled("default", Q, clock(), limits, pending, claimed)


def claim_outside_the_limits(fq: Queue, n: int, key: str | None = None) -> None:
    """Claimed rows as another claim left them (the figures only read the table)."""
    rows = QueueMessage.objects.filter(queue=Q, claim_token__isnull=True)
    if key is not None:
        rows = rows.filter(concurrency_key=key)
    for job_id in rows.order_by("id").values_list("id", flat=True)[:n]:
        QueueMessage.objects.filter(id=job_id).update(
            claim_token=uuid.UUID(int=job_id), claimed_by="w",
            claimed_at=fq.clock(), lease_expires_at=fq.clock() + timedelta(seconds=30),
        )  # fmt: skip


# -- throttled -------------------------------------------------------------------------------


def test_an_unlimited_queue_throttles_nothing(fq, clock):
    fq.enqueue_many([{}] * 5)
    assert throttled(clock, Limits()) == 0


def test_jobs_waiting_under_a_cap_with_room_are_not_throttled(fq, clock):
    fq.enqueue_many([{}] * 5)
    claim_outside_the_limits(fq, 1)
    assert throttled(clock, Limits(concurrency=3)) == 0


def test_every_due_job_is_throttled_while_the_concurrency_is_taken(fq, clock):
    fq.enqueue_many([{}] * 5)
    fq.enqueue({}, delay=600)  # scheduled: not due, not held back
    claim_outside_the_limits(fq, 2)
    assert throttled(clock, Limits(concurrency=2)) == 3


def test_every_due_job_is_throttled_while_the_rate_is_spent(fq, clock):
    fq.enqueue_many([{}] * 4)
    ClaimLedger.objects.create(queue=Q, concurrency_key="", claimed_at=clock(), count=10)
    assert throttled(clock, Limits(rate=Rate(10, 60.0))) == 4
    clock.advance(60)
    assert throttled(clock, Limits(rate=Rate(10, 60.0))) == 0


def test_the_jobs_of_a_key_beyond_its_room_are_throttled(fq, clock):
    fq.enqueue_many([{}] * 4, concurrency_key="busy")
    fq.enqueue_many([{}] * 2, concurrency_key="quiet")
    fq.enqueue({})
    claim_outside_the_limits(fq, 1, key="busy")
    # busy: 1 running, 3 due, room 1 -> 2 held back; quiet: room 2 -> none; unkeyed: none
    assert throttled(clock, Limits(key_concurrency=2)) == 2


def test_a_key_that_spent_its_key_rate_is_throttled_whole(fq, clock):
    fq.enqueue_many([{}] * 3, concurrency_key="busy")
    fq.enqueue({}, concurrency_key="quiet")
    ClaimLedger.objects.create(queue=Q, concurrency_key="busy", claimed_at=clock(), count=5)
    assert throttled(clock, Limits(key_rate=Rate(5, 1.0))) == 3
    clock.advance(1)
    assert throttled(clock, Limits(key_rate=Rate(5, 1.0))) == 0


# -- busiest keys ----------------------------------------------------------------------------


def test_the_busiest_keys_are_the_top_20_by_running_then_pending(fq, clock):
    for i in range(25):
        fq.enqueue_many([{}] * (i % 5 + 1), concurrency_key=f"k{i:02}")
    claim_outside_the_limits(fq, 1, key="k00")
    keys = flow_status.busiest_keys("default", Q, clock())
    assert len(keys) == 20
    assert keys[0] == flow_status.KeyLoad("k00", 1, 0)
    assert [k.running + k.pending for k in keys[1:6]] == [5] * 5
    assert keys[1].key == "k04"


def test_the_busiest_keys_are_one_query(fq, clock):
    fq.enqueue_many([{"i": i} for i in range(50)], concurrency_key=lambda p: f"k{p['i'] % 7}")
    with CaptureQueriesContext(connection) as captured:
        flow_status.busiest_keys("default", Q, clock())
    assert len(captured.captured_queries) == 1


@pytest.mark.postgres_only
def test_the_busiest_keys_and_the_job_list_filter_read_the_concurrency_key_index(clock):
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO alkqueue_message (queue, payload, priority, attempts, max_attempts,
                backoff_base, lease, run_at, enqueued_at, concurrency_key)
            SELECT 'q' || (i % 50), '{}', 0, 0, 3, 5, 30, now(), now(),
                   CASE WHEN i % 3 = 0 THEN 'key:' || (i % 400) END
            FROM generate_series(1, 100000) AS i
            """
        )
        cursor.execute("ANALYZE alkqueue_message")
    keys = flow_status.busiest_keys("default", "q3", clock())
    plan = flow_status._per_key("default", "q3", clock()).order_by("-running")[:20].explain()
    assert "alkqueue_concurrency_key_idx" in plan, plan
    assert keys
    listed = QueueMessage.objects.filter(queue="q3", concurrency_key="key:3").order_by("-id")
    assert "alkqueue_concurrency_key_idx" in listed[:50].explain()


# -- alk_status ------------------------------------------------------------------------------


def status(*args: str) -> str:
    out = io.StringIO()
    call_command("alk_status", *args, stdout=out)
    return out.getvalue()


def test_alk_status_shows_the_flow_of_limited_queues():
    limited(concurrency=4, key_concurrency=1)
    queue(Q).enqueue_many([{}] * 3, concurrency_key="customer:1")
    assert len(queue(Q).claim("w", 10)) == 1  # key_concurrency=1
    text = status()
    assert "flow control" in text
    (line,) = [row for row in text.splitlines() if row.startswith(f"{Q} ") and "override" in row]
    assert re.split(r"\s{2,}", line) == [
        Q, "concurrency=4 (override), key_concurrency=1 (override)", "1/4", "2", "customer:1 1/2",
    ]  # fmt: skip


def test_alk_status_leaves_the_flow_table_out_without_limits():
    queue(Q).enqueue({})
    assert "flow control" not in status()


def test_alk_status_json_has_the_limits_their_sources_and_the_flow():
    limited(rate=Rate(10, 60.0))
    queue(Q).enqueue({}, concurrency_key="customer:1")
    (row,) = json.loads(status("--json"))["queues"]
    assert row["limits"] == {"concurrency": None, "key_concurrency": None, "rate": "10/m",
                             "key_rate": None}  # fmt: skip
    assert row["limit_sources"] == {"rate": "override"}
    assert row["flow"] == {
        "claimed": 0, "concurrency": None, "throttled": 0,
        "busiest_keys": [{"key": "customer:1", "running": 0, "pending": 1}],
    }  # fmt: skip


def test_alk_status_json_has_no_flow_for_an_unlimited_queue():
    queue(Q).enqueue({})
    (row,) = json.loads(status("--json"))["queues"]
    assert row["flow"] is None and row["limit_sources"] == {}
