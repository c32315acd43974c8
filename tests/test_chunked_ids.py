"""Lists of ids reach SQL in bounded chunks (Dialect.ids_per_statement) on every database, so
no call outgrows a limit on bound parameters however many rows it touches (issue 33, 1)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import OperationalError, connections

from django_alkqueue import operations
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.sql import chunked, dialect_for
from django_alkqueue.worker.maintenance import ReclaimService

pytestmark = pytest.mark.django_db

#: SQLite's limit on bound parameters in a default build (SQLITE_MAX_VARIABLE_NUMBER).
DEFAULT_SQLITE_LIMIT = 32_766
LAPSED = 33_000


@pytest.fixture
def default_sqlite_limit() -> Iterator[None]:
    """On SQLite, this connection binds at most as many parameters as a default build allows
    (Debian's allows 250,000), so the many-row tests hit the limit the issue reports."""
    main = connections["default"]
    if main.vendor != "sqlite":
        yield
        return
    main.ensure_connection()
    raw = main.connection
    before = raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, DEFAULT_SQLITE_LIMIT)
    yield
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, before)


def many() -> int:
    """More rows than one statement may bind: past a default SQLite build's limit on SQLite;
    elsewhere three of the dialect's own chunks and one more (MariaDB's limits are far off,
    and 33,000 rows there cost half a minute a test)."""
    main = connections["default"]
    if main.vendor == "sqlite":
        return LAPSED
    return 3 * dialect_for(main).ids_per_statement + 1


def _lapsed_claims(q, clock, count: int, **options) -> list[int]:
    """`count` jobs claimed at their one attempt, by a worker that died: leases lapsed."""
    ids = [job.id for job in q.enqueue_many(list(range(count)), max_attempts=1, **options)]
    claimed = 0
    while claimed < count:
        claimed += len(q.claim("crashed", 10_000))
    clock.advance(q.lease + 1)
    return ids


def test_chunked_slices_in_order_and_keeps_the_remainder():
    assert [list(c) for c in chunked([1, 2, 3, 4, 5], 2)] == [[1, 2], [3, 4], [5]]
    assert list(chunked([], 3)) == []


def test_a_statement_binding_more_than_a_default_sqlite_build_allows_is_refused(
    default_sqlite_limit,
):
    # What the tests below would meet, were the ids not chunked.
    main = connections["default"]
    if main.vendor != "sqlite":
        pytest.skip("the limit on bound parameters is SQLite's")
    with pytest.raises(OperationalError, match="too many SQL variables"), main.cursor() as c:
        c.execute("SELECT " + ", ".join(["%s"] * LAPSED), [1] * LAPSED)


def test_sweep_expired_moves_more_lapsed_claims_than_sqlite_binds_at_once(
    q, clock, default_sqlite_limit
):
    count = many()
    _lapsed_claims(q, clock, count, expires=q.lease + 1)
    assert q.sweep_expired() == count
    assert DeadLetter.objects.filter(reason="expired").count() == count
    assert QueueMessage.objects.count() == 0


def test_claim_one_after_more_exhausted_lapsed_claims_than_sqlite_binds_at_once(
    q, clock, default_sqlite_limit
):
    count = many()
    _lapsed_claims(q, clock, count)
    fresh = q.enqueue("fresh")
    handle = q.claim_one("w")
    assert handle is not None and handle.job.id == fresh.id
    assert DeadLetter.objects.filter(reason="max attempts exceeded").count() == count


def test_reclaim_after_more_exhausted_lapsed_claims_than_sqlite_binds_at_once(
    q, clock, default_sqlite_limit
):
    count = many()
    _lapsed_claims(q, clock, count)
    assert ReclaimService("default").run_once(clock()) == (0, count)
    assert QueueMessage.objects.count() == 0


def test_ack_batch_of_250_001_ids_acks_the_claimed_ones(q, clock):
    jobs = q.enqueue_many(list(range(1_000)))
    claimed = [h.job.id for h in q.claim("w", 1_000)]
    unknown = range(10**9, 10**9 + 250_001 - len(claimed))
    assert q.ack_batch([*claimed, *unknown]) == len(jobs)
    assert QueueMessage.objects.count() == 0


@pytest.fixture
def three_per_statement(monkeypatch) -> None:
    """Chunks of three, so a handful of rows crosses several chunk boundaries."""
    dialect = dialect_for(connections["default"])
    monkeypatch.setattr(type(dialect), "ids_per_statement", 3)


def test_ack_of_claims_across_chunks_acks_each_valid_claim(q, three_per_statement):
    q.enqueue_many(list(range(10)))
    handles = q.claim("w", 10)
    stale = handles[0].claim._replace(token=uuid.uuid4())
    claims = [h.claim for h in handles]
    acked = operations.ack(q.using, [stale, *claims], q.clock())
    assert acked == set(claims)
    assert QueueMessage.objects.count() == 0


def test_heartbeat_of_claims_across_chunks_heartbeats_each(q, clock, three_per_statement):
    q.enqueue_many(list(range(7)))
    handles = q.claim("w", 7)
    expires = clock() + timedelta(seconds=600)
    extended = operations.heartbeat(q.using, [(h.claim, expires) for h in handles], clock())
    assert extended == {h.claim for h in handles}
    assert QueueMessage.objects.filter(lease_expires_at=expires).count() == 7


def test_a_load_of_claimed_steps_across_chunks_reads_each_valid_claims_steps(
    q, clock, three_per_statement
):
    q.enqueue_many(list(range(7)))
    handles = q.claim("w", 7)
    for handle in handles[1:]:
        assert operations.record_step(q.using, handle.claim, clock(), "s", f"{handle.job.id}", 0)
    stale = handles[0].claim._replace(token=uuid.uuid4())
    loaded = operations.load_claimed_steps(
        q.using, [stale, *[h.claim for h in handles[1:]]], clock()
    )
    assert loaded == {h.job.id: {"s": f"{h.job.id}"} for h in handles[1:]}


def test_ack_batch_across_chunks_acks_every_claimed_id(q, three_per_statement):
    q.enqueue_many(list(range(8)))
    ids = [h.job.id for h in q.claim("w", 8)]
    assert q.ack_batch(ids) == 8


def test_fail_and_sweep_across_chunks_return_every_dead_letter(q, clock, three_per_statement):
    q.enqueue_many(list(range(7)), expires=5)
    clock.advance(5)
    assert q.sweep_expired() == 7
    assert DeadLetter.objects.count() == 7


def test_admin_operations_on_ids_across_chunks_touch_every_row(q, clock, three_per_statement):
    scheduled = [job.id for job in q.enqueue_many(list(range(7)), delay=60)]
    assert operations.run_now(q.using, scheduled, clock()) == 7
    assert operations.change_priority(q.using, scheduled, 5) == 7
    for handle in q.claim("w", 7):
        handle.fail("boom")
    dead = list(DeadLetter.objects.values_list("pk", flat=True))
    assert operations.purge_dead_letters(q.using, dead) == 7
