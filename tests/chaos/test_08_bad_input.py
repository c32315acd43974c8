"""Scenario 8, bad input, property-based (PostgreSQL and SQLite): random payloads, queue
names, worker ids, durations (negative, huge, NaN, infinite, of the wrong type), priorities,
attempts, unique and concurrency keys (NULs, lone surrogates, terminal escape codes and
numbers past what Python prints among them) through queue(), enqueue, enqueue_many, claim,
retry and heartbeat.

Each call is either accepted, and what it wrote reads back exactly (get_job), or refused with
one of our documented exceptions (AlkQueueError: InvalidName, InvalidOption, PayloadError),
with both tables exactly as they were. Never a database error, never a partial write.

Each example runs in a savepoint that is rolled back, so examples do not see each other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import given
from hypothesis import strategies as st

from django_alkqueue import AlkQueueError, InvalidOption, queue
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.queues import Queue
from tests.clocks import FakeClock

from .invariants import Figures, Report
from .record import Stopwatch, record
from .scale import pick
from .strategies import (
    NOW,
    any_text,
    anything,
    batch_sizes,
    json_values,
    optional_durations,
    options,
    payloads,
    property_settings,
    queue_names,
    worker_ids,
)

pytestmark = pytest.mark.django_db

EXAMPLES = pick(short=40, long=1_500)
PROPERTY = property_settings(EXAMPLES)
TALLY: Counter[str] = Counter()


# -- how each example is judged --------------------------------------------------------------


def snapshot() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every row of both tables, so a refused call can be shown to have written nothing."""
    return (
        list(QueueMessage.objects.order_by("pk").values()),
        list(DeadLetter.objects.order_by("pk").values()),
    )


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 is not 1.0 is not True; -0.0 is not
    0.0): what "round-trips exactly" means for a payload."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def judged(
    operation: str,
    call: Callable[[Any], Any],
    verify: Callable[[Any, Any], None],
    setup: Callable[[], Any] = lambda: None,
) -> None:
    """In a savepoint that is rolled back: `setup()`, then `call(state)`; when it is accepted,
    `verify(state, result)` reads back what it wrote; when it is refused, it must have raised
    our exception and left every row as it was. Anything else propagates and fails."""
    with transaction.atomic():
        state = setup()
        before = snapshot()
        try:
            result = call(state)
        except AlkQueueError as refused:
            assert snapshot() == before, f"{operation} refused ({refused!r}) after writing"
            TALLY[f"{operation} refused"] += 1
        else:
            verify(state, result)
            TALLY[f"{operation} accepted"] += 1
        transaction.set_rollback(True)


def fresh(name: str = "prop", **options: Any) -> Queue:
    return queue(name, clock=FakeClock(NOW), **options)


def as_delta(value: Any) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


def expected_run_at(opts: dict[str, Any]) -> datetime:
    if opts.get("delay") is not None:
        return NOW + as_delta(opts["delay"])
    return opts["run_at"] if opts.get("run_at") is not None else NOW


def stored(q: Queue, job_id: int) -> Any:
    job = q.get_job(job_id)
    assert job is not None, f"job {job_id} accepted but not found"
    return job


@pytest.fixture(scope="module", autouse=True)
def figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """Record scenario 8 once the module's tests have run."""
    TALLY.clear()
    failed_before = request.session.testsfailed
    clock = Stopwatch()
    yield
    accepted = sum(n for key, n in TALLY.items() if key.endswith("accepted"))
    refused = sum(n for key, n in TALLY.items() if key.endswith("refused"))
    failures = request.session.testsfailed - failed_before
    report = Report(
        Figures(jobs=accepted, faults=refused),
        [f"{failures} property test(s) failed"] if failures else [],
    )
    record(
        8,
        "Bad input (property-based)",
        f"{EXAMPLES:,} random examples per property through queue(), enqueue, "
        "enqueue_many, claim, retry and heartbeat: payloads, queue names, worker ids, "
        "durations, priorities, attempts, unique keys, run_at",
        report,
        clock.seconds(),
        {"calls": dict(sorted(TALLY.items())), "database": connection.vendor},
    )


# -- the properties --------------------------------------------------------------------------


@PROPERTY
@given(payload=payloads, opts=options)
def test_enqueue_round_trips_exactly_or_refuses_without_writing(payload: Any, opts: dict):
    q = fresh()

    def verify(_: None, job: Any) -> None:
        got = stored(q, job.id)
        assert same(got.payload, payload)
        assert got.queue == q.name
        assert got.run_at == expected_run_at(opts)
        assert got.priority == (opts.get("priority") if opts.get("priority") is not None else 0)
        assert got.max_attempts == (opts.get("max_attempts") or q.max_attempts)
        assert got.unique_key == opts.get("unique_key")
        assert got.concurrency_key == opts.get("concurrency_key")
        if opts.get("expires") is not None:
            assert got.expires_at == NOW + as_delta(opts["expires"])

    judged("enqueue", lambda _: q.enqueue(payload, **opts), verify)


@PROPERTY
@given(batch=st.lists(payloads, max_size=4), opts=options)
def test_enqueue_many_writes_all_or_nothing(batch: list[Any], opts: dict):
    q = fresh()

    def verify(_: None, jobs: list[Any]) -> None:
        assert len(jobs) == len(batch)
        if opts.get("unique_key") is not None:  # one key: the first payload wins, once
            assert len({j.id for j in jobs}) == min(len(batch), 1)
            expected = batch[:1] * len(batch)
        else:
            assert len({j.id for j in jobs}) == len(batch)
            expected = batch
        for job, payload in zip(jobs, expected, strict=True):
            assert same(stored(q, job.id).payload, payload)
            assert stored(q, job.id).concurrency_key == opts.get("concurrency_key")
        assert QueueMessage.objects.count() == len({j.id for j in jobs})

    judged("enqueue_many", lambda _: q.enqueue_many(batch, **opts), verify)


@PROPERTY
@given(name=queue_names, payload=json_values)
def test_queue_names_are_refused_or_their_jobs_land_in_that_queue(name: Any, payload: Any):
    def verify(_: None, job: Any) -> None:
        assert stored(fresh(name), job.id).queue == name

    judged("queue", lambda _: queue(name, clock=FakeClock(NOW)).enqueue(payload), verify)


@PROPERTY
@given(worker=worker_ids, n=batch_sizes)
def test_claim_stamps_the_exact_worker_id_or_refuses(worker: Any, n: Any):
    q = fresh()

    def setup() -> list[int]:
        return [j.id for j in q.enqueue_many([{"n": 1}, {"n": 2}])]

    def verify(ids: list[int], handles: list[Any]) -> None:
        assert len(handles) == max(min(n, len(ids)), 0)
        for handle in handles:
            got = stored(q, handle.job.id)
            assert (got.claimed_by, got.attempts, got.state) == (worker, 1, "claimed")
            assert got.lease_expires_at == NOW + timedelta(seconds=q.lease)

    judged("claim", lambda ids: q.claim(worker, n), verify, setup)


@PROPERTY
@given(
    error=st.one_of(st.none(), any_text, anything),
    delay=optional_durations,
    last_attempt=st.booleans(),
)
def test_retry_reschedules_or_dead_letters_exactly_or_refuses(
    error: Any, delay: Any, last_attempt: bool
):
    q = fresh(max_attempts=1 if last_attempt else 3)

    def setup() -> Any:
        q.enqueue({"n": 1})
        return q.claim_one("w")

    def verify(handle: Any, done: bool) -> None:
        got = stored(q, handle.job.id)
        assert done is True
        text = error if isinstance(error, str) else None if error is None else _str(error)
        if isinstance(text, str) and "\x00" not in text and _encodable(text):
            assert got.last_error == text
        if last_attempt:
            assert (got.state, got.reason) == ("dead", "max attempts exceeded")
            return
        assert got.state in ("pending", "scheduled") and got.claimed_by is None
        assert got.attempts == 1
        if delay is not None:
            assert got.run_at == NOW + as_delta(delay)

    judged("retry", lambda handle: handle.retry(error, delay=delay), verify, setup)


@PROPERTY
@given(extend=optional_durations)
def test_heartbeat_sets_the_exact_lease_or_refuses(extend: Any):
    q = fresh()

    def setup() -> Any:
        q.enqueue({"n": 1})
        return q.claim_one("w")

    def verify(handle: Any, done: bool) -> None:
        assert done is True
        lease = as_delta(extend) if extend is not None else timedelta(seconds=q.lease)
        assert stored(q, handle.job.id).lease_expires_at == NOW + lease

    judged("heartbeat", lambda handle: handle.heartbeat(extend), verify, setup)


def _str(value: Any) -> str | None:
    """str(value); None for an int too long to print (more than 4,300 digits)."""
    try:
        return str(value)
    except ValueError:
        return None


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


# -- found by these properties ---------------------------------------------------------------

HUGE = 10**400  # an int float() cannot hold


def _claimed(q: Queue) -> Any:
    q.enqueue({"n": 1})
    return q.claim_one("w")


def _queue(q: Queue) -> Queue:
    return q


@pytest.mark.parametrize(
    ("prepare", "call"),
    [
        pytest.param(_queue, lambda q: q.enqueue({}, delay=HUGE), id="enqueue-delay"),
        pytest.param(_queue, lambda q: q.enqueue({}, expires=-HUGE), id="enqueue-expires"),
        pytest.param(_queue, lambda q: fresh(lease=HUGE), id="queue-lease"),
        pytest.param(_claimed, lambda h: h.retry("e", delay=HUGE), id="retry-delay"),
        pytest.param(_claimed, lambda h: h.heartbeat(HUGE), id="heartbeat-extend"),
    ],
)
def test_durations_beyond_float_range_are_refused_with_invalid_option(
    prepare: Callable, call: Callable
):
    target = prepare(fresh())  # a queue, or a handle claimed before the snapshot
    before = snapshot()
    with pytest.raises(InvalidOption):
        call(target)
    assert snapshot() == before
