"""The fair claims per key and 5-minute bucket (issue 52; docs/fair-share.md, "Share of claims"):
what each fair claim adds in its transaction, the share of the last hour's claims the admin's
queue page shows, and the leader's sweep of the old buckets."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_alkqueue import fair_share
from django_alkqueue.models import FairClaims, fair_claims_bucket
from django_alkqueue.queues import Queue
from django_alkqueue.worker.maintenance import SweepService
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db

QUEUE = "tenants"
#: The FakeClock's start, 12:00:00.123456, falls in the bucket that starts at 12:00.
NOON = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def fq(make_queue: Callable[..., Queue]) -> Queue:
    return make_queue(QUEUE)


def buckets() -> dict[tuple[str, datetime], int]:
    """The queue's fair claims: (key, bucket start) -> claims."""
    rows = FairClaims.objects.filter(queue=QUEUE).values_list("fair_key", "bucket", "claims")
    return {(key, bucket): claims for key, bucket, claims in rows}


def claimed(fq: Queue, n: int) -> int:
    return len(fq.claim("w", n))


def shares(fq: Queue, clock: FakeClock, **kwargs: int) -> dict[str, float | None]:
    loads = fair_share.keys_with_jobs(QUEUE, None, clock(), **kwargs)
    return {load.key: load.share for load in loads}


def add_claims(key: str, bucket: datetime, claims: int) -> None:
    FairClaims.objects.create(queue=QUEUE, fair_key=key, bucket=bucket, claims=claims)


# -- the bucket ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "start"),
    [
        (datetime(2030, 1, 1, 12, 0, tzinfo=UTC), datetime(2030, 1, 1, 12, 0, tzinfo=UTC)),
        (datetime(2030, 1, 1, 12, 4, 59, 999999, tzinfo=UTC),
         datetime(2030, 1, 1, 12, 0, tzinfo=UTC)),
        (datetime(2030, 1, 1, 12, 5, tzinfo=UTC), datetime(2030, 1, 1, 12, 5, tzinfo=UTC)),
        (datetime(2030, 1, 1, 23, 59, 30, tzinfo=UTC), datetime(2030, 1, 1, 23, 55, tzinfo=UTC)),
    ],
)  # fmt: skip
def test_a_bucket_starts_on_the_five_minute_mark_before_its_time(
    at: datetime, start: datetime
) -> None:
    assert fair_claims_bucket(at) == start


# -- what a fair claim adds ------------------------------------------------------------------


def test_a_fair_claim_adds_its_jobs_per_key_to_the_current_bucket(fq: Queue) -> None:
    fq.enqueue_many(["a"] * 3, fair_key="a")
    fq.enqueue_many(["b"] * 3, fair_key="b")
    assert claimed(fq, 4) == 4
    assert buckets() == {("a", NOON): 2, ("b", NOON): 2}


def test_two_claims_in_one_bucket_add_up(fq: Queue, clock: FakeClock) -> None:
    fq.enqueue_many(["a"] * 4, fair_key="a")
    fq.enqueue_many(["b"] * 4, fair_key="b")
    claimed(fq, 2)
    clock.advance(minutes=4)
    claimed(fq, 3)
    assert buckets() == {("a", NOON): 3, ("b", NOON): 2}


def test_a_claim_in_the_next_bucket_starts_a_new_row(fq: Queue, clock: FakeClock) -> None:
    fq.enqueue_many(["a"] * 4, fair_key="a")
    claimed(fq, 1)
    clock.advance(minutes=5)
    claimed(fq, 2)
    assert buckets() == {("a", NOON): 1, ("a", NOON + timedelta(minutes=5)): 2}


def test_the_jobs_without_a_fair_key_count_under_the_no_key_key(fq: Queue) -> None:
    fq.enqueue_many([None] * 2)
    fq.enqueue_many(["a"] * 2, fair_key="a")
    claimed(fq, 4)
    assert buckets() == {("", NOON): 2, ("a", NOON): 2}


def test_the_orm_dialect_adds_up_too(fq: Queue) -> None:
    with override_settings(ALKQUEUE={"DIALECT": "orm"}):
        fq.enqueue_many(["a"] * 4, fair_key="a")
        claimed(fq, 1)
        claimed(fq, 2)
    assert buckets() == {("a", NOON): 3}


def test_a_claim_that_finds_nothing_writes_no_fair_claims(fq: Queue) -> None:
    fq.enqueue("a", fair_key="a", delay=60)
    assert claimed(fq, 1) == 0
    assert buckets() == {}


def test_a_queue_without_fair_keys_writes_no_fair_claims(fq: Queue) -> None:
    fq.enqueue_many([1, 2, 3])
    assert claimed(fq, 3) == 3
    assert not FairClaims.objects.exists()


# -- the share of the last hour's claims -----------------------------------------------------


def test_the_share_is_each_keys_part_of_the_last_hours_claims(fq: Queue, clock: FakeClock) -> None:
    fq.enqueue_many(["a"] * 6, fair_key="a")
    fq.enqueue_many(["b"] * 2, fair_key="b")
    add_claims("a", NOON - timedelta(minutes=30), 3)
    add_claims("b", NOON, 1)
    assert shares(fq, clock) == {"a": 0.75, "b": 0.25}


def test_the_share_over_the_last_hour_leaves_out_an_older_bucket(
    fq: Queue, clock: FakeClock
) -> None:
    fq.enqueue("a", fair_key="a")
    fq.enqueue("b", fair_key="b")
    add_claims("a", NOON - timedelta(minutes=55), 1)
    add_claims("b", NOON - timedelta(minutes=60), 9)  # started an hour ago: not within it
    assert shares(fq, clock) == {"a": 1.0, "b": 0.0}


def test_the_share_is_none_when_the_queue_had_no_fair_claims_in_the_hour(
    fq: Queue, clock: FakeClock
) -> None:
    fq.enqueue("a", fair_key="a")
    add_claims("a", NOON - timedelta(hours=2), 5)
    FairClaims.objects.create(queue="other", fair_key="a", bucket=NOON, claims=5)
    assert shares(fq, clock) == {"a": None}


def test_a_key_with_claims_in_the_hour_and_no_unclaimed_job_is_listed_after_the_others(
    fq: Queue, clock: FakeClock
) -> None:
    fq.enqueue("a", fair_key="a")
    add_claims("a", NOON, 1)
    add_claims("gone", NOON, 2)
    add_claims("", NOON, 1)
    loads = fair_share.keys_with_jobs(QUEUE, {"gone": 3}, clock())
    assert loads == [
        fair_share.KeyLoad("a", 1, 1, 0.25),
        fair_share.KeyLoad("gone", 0, 3, 0.5),
        fair_share.KeyLoad("", None, 1, 0.25),
    ]


def test_the_keys_with_claims_only_are_limited_to_top_too(fq: Queue, clock: FakeClock) -> None:
    fq.enqueue("a", fair_key="a")
    for n, key in enumerate(["x", "y", "z"], start=1):
        add_claims(key, NOON, n)
    assert list(shares(fq, clock, top=2)) == ["a", "z", "y"]


def test_a_key_with_claims_beyond_the_top_ready_keys_shows_its_unclaimed_jobs(
    fq: Queue, clock: FakeClock
) -> None:
    fq.enqueue_many(["a"] * 2, fair_key="a")
    fq.enqueue("b", fair_key="b")
    add_claims("b", NOON, 1)
    loads = fair_share.keys_with_jobs(QUEUE, None, clock(), top=1)
    assert [(load.key, load.unclaimed, load.share) for load in loads] == [
        ("a", 2, 0.0),
        ("b", 1, 1.0),
    ]


# -- the leader's sweep ----------------------------------------------------------------------


def test_the_sweep_deletes_buckets_older_than_two_hours_and_keeps_newer_ones(
    clock: FakeClock,
) -> None:
    for minutes in (125, 120, 115, 0):  # 12:00's sweep runs at 12:00:00.123456
        add_claims("a", NOON - timedelta(minutes=minutes), 1)
    SweepService("default").run_once(clock())
    kept = [NOON - timedelta(minutes=m) for m in (115, 0)]
    assert sorted(bucket for _, bucket in buckets()) == kept


def test_the_sweep_deletes_at_most_its_batch(clock: FakeClock) -> None:
    for hours in (3, 4, 5):
        add_claims("a", NOON - timedelta(hours=hours), 1)
    SweepService("default", fair_claims_batch=2).run_once(clock())
    assert len(buckets()) == 1
    SweepService("default", fair_claims_batch=2).run_once(clock())
    assert buckets() == {}


# -- the indexes the reads rely on (PostgreSQL's plans) --------------------------------------


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def fair_claims_reads(call: Callable[[], object]) -> list[str]:
    """The statements `call` runs on alkqueue_fairclaims that read it."""
    with CaptureQueriesContext(connection) as captured:
        call()
    return [q["sql"] for q in captured.captured_queries
            if "alkqueue_fairclaims" in q["sql"] and q["sql"].startswith("SELECT")]  # fmt: skip


@pytest.fixture
def many_fair_claims() -> None:
    """Two and a half hours of buckets of 50 queues with 20 keys each: 30,000 rows."""
    starts = [NOON - timedelta(minutes=5 * i) for i in range(30)]
    FairClaims.objects.bulk_create(
        FairClaims(queue=f"q{q}", fair_key=f"k{k}", bucket=start, claims=1)
        for q in range(50) for k in range(20) for start in starts
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE alkqueue_fairclaims")


@pytest.mark.postgres_only
def test_the_share_reads_a_queues_hour_through_the_unique_constraint(
    many_fair_claims: None, clock: FakeClock
) -> None:
    reads = fair_claims_reads(lambda: fair_share.keys_with_jobs("q3", None, clock()))
    assert reads
    for sql in reads:
        plan = plan_of(sql)
        assert "alkqueue_fair_claims_key" in plan and "Seq Scan" not in plan, (sql, plan)


@pytest.mark.postgres_only
def test_the_sweep_finds_the_old_buckets_through_the_bucket_index(
    many_fair_claims: None, clock: FakeClock
) -> None:
    reads = fair_claims_reads(lambda: SweepService("default").run_once(clock()))
    assert reads
    for sql in reads:
        plan = plan_of(sql)
        assert "alkqueue_fair_bucket_idx" in plan and "Seq Scan" not in plan, (sql, plan)
