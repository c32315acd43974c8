"""The rest of the public API, property-based (PostgreSQL and SQLite), beside scenario 8's
enqueue, claim, retry and heartbeat: queue()'s options (clock, rng, using too), the enqueue()
shortcut, huge and deeply nested payloads, get_job, cancel, requeue, purge, ack_batch,
fail, stats, @consumer, RetryPolicy, and the ALKQUEUE setting.

Each call either succeeds with the result the reference states, or raises the documented
exception with every row as it was (scenario 8's `judged`, in a rolled-back savepoint).
`make test` runs a bounded number of examples; `make chaos` (CHAOS_LONG=1) many more.
"""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_alkqueue import (
    AlkQueueError,
    InvalidOption,
    PayloadError,
    RetryPolicy,
    consumer,
    enqueue,
    queue,
)
from django_alkqueue.conf import RULES, read_settings
from django_alkqueue.consumers import registry
from django_alkqueue.defaults import MAX_ERROR_CHARS
from django_alkqueue.error_text import capped
from django_alkqueue.jobs import STATES
from django_alkqueue.models import DeadLetter, QueueMessage
from django_alkqueue.validation import clean_error_text
from tests.clocks import FakeClock

from .scale import pick
from .strategies import (
    ANY_INTS,
    NOW,
    any_text,
    anything,
    attempt_limits,
    json_values,
    mostly,
    optional_durations,
    payloads,
    priorities,
    property_settings,
    queue_names,
)
from .test_08_bad_input import fresh, judged, same, snapshot, stored

pytestmark = pytest.mark.django_db

PROPERTY = property_settings(pick(short=30, long=1_000))

job_ids = mostly(st.integers(1, 2**63 - 1), st.one_of(ANY_INTS, anything, st.just(1.0)))
clocks = mostly(
    st.just(FakeClock(NOW)),
    st.one_of(
        anything,
        st.just(lambda: datetime(2030, 1, 1)),  # naive while USE_TZ is on
        st.just(lambda: "2030-01-01"),
    ),
)
rngs = mostly(st.one_of(st.none(), st.builds(random.Random, st.integers())), anything)
aliases = mostly(st.just("default"), st.one_of(any_text, anything))
queue_options = st.fixed_dictionaries(
    {},
    optional={
        "max_attempts": st.one_of(st.none(), attempt_limits),
        "backoff_base": optional_durations,
        "lease": optional_durations,
        "retention": optional_durations,
        "priority": st.one_of(st.none(), priorities),
        "expires": optional_durations,
        "using": st.one_of(st.none(), aliases),
        "clock": clocks,
        "rng": rngs,
    },
)
state_choices = mostly(
    st.one_of(st.sampled_from(STATES), st.lists(st.sampled_from(STATES), max_size=4)),
    st.one_of(anything, st.lists(st.one_of(any_text, anything), min_size=1, max_size=3)),
)


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def seconds(value: Any) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


# -- queue() and the enqueue() shortcut -------------------------------------------------------


@PROPERTY
@given(name=queue_names, opts=queue_options)
def test_queue_builds_with_exactly_its_options_or_refuses(name: Any, opts: dict[str, Any]):
    before = snapshot()
    try:
        q = queue(name, **opts)
    except AlkQueueError:
        assert snapshot() == before
        return
    assert q.name == name
    assert q.using == (opts.get("using") or "default")
    for option in ("backoff_base", "lease", "expires"):
        if opts.get(option) is not None:
            assert getattr(q, option) == seconds(opts[option])
    if opts.get("max_attempts") is not None:
        assert q.max_attempts == opts["max_attempts"]
    assert q.rng is opts.get("rng")
    assert snapshot() == before  # building a queue writes nothing


@PROPERTY
@given(payload=json_values, opts=queue_options)
def test_the_enqueue_shortcut_stamps_its_options_or_refuses_without_writing(
    payload: Any, opts: dict[str, Any]
):
    def verify(_: None, job: Any) -> None:
        got = stored(fresh(), job.id)
        assert same(got.payload, payload)
        if opts.get("lease") is not None:
            assert got.lease == seconds(opts["lease"])
        if opts.get("priority") is not None:
            assert got.priority == opts["priority"]

    judged("enqueue()", lambda _: enqueue("prop", payload, **opts), verify)


# -- payloads: huge, deeply nested ------------------------------------------------------------


@PROPERTY
@given(depth=st.integers(1, 3_000), leaf=st.one_of(json_values, payloads))
def test_a_deeply_nested_payload_round_trips_or_is_refused_without_writing(depth: int, leaf: Any):
    payload: Any = leaf
    for level in range(depth):
        payload = [payload] if level % 2 else {"k": payload}
    q = fresh()

    def verify(_: None, job: Any) -> None:
        # As JSON text: as exact as `same` (1, 1.0 and true differ) without its recursion.
        assert as_json(stored(q, job.id).payload) == as_json(payload)

    judged("enqueue nested", lambda _: q.enqueue(payload), verify)


@PROPERTY
@given(size=st.integers(0, 300), limit=st.integers(1, 256), char=st.sampled_from("aé\U0001f600"))
def test_a_payload_over_max_payload_bytes_is_refused_and_one_within_is_stored(
    size: int, limit: int, char: str
):
    payload = char * size
    fits = len(json.dumps(payload, ensure_ascii=False).encode()) <= limit
    q = fresh()
    with override_settings(ALKQUEUE={"MAX_PAYLOAD_BYTES": limit}), transaction.atomic():
        before = snapshot()
        try:
            job = q.enqueue(payload)
        except PayloadError:
            assert not fits and snapshot() == before
        else:
            assert fits and stored(q, job.id).payload == payload
        transaction.set_rollback(True)


# -- reads and removals by id -----------------------------------------------------------------


@PROPERTY
@given(job_id=job_ids)
def test_get_job_reads_or_refuses_and_never_writes(job_id: Any):
    q = fresh()

    def verify(_: None, job: Any) -> None:
        assert job is None or job.id == job_id

    judged("get_job", lambda _: q.get_job(job_id), verify)


@PROPERTY
@given(pick_own=st.booleans(), other=job_ids)
def test_cancel_deletes_exactly_the_named_job_or_refuses(pick_own: bool, other: Any):
    q = fresh()

    def setup() -> int:
        job_id: int = q.enqueue({"n": 1}).id
        return job_id

    def verify(own: int, done: bool) -> None:
        target = own if pick_own else other
        assert done is (target == own)
        assert QueueMessage.objects.filter(pk=own).exists() is not done

    judged("cancel", lambda own: q.cancel(own if pick_own else other), verify, setup)


@PROPERTY
@given(pick_own=st.booleans(), other=job_ids)
def test_requeue_revives_exactly_the_named_dead_letter_or_refuses(pick_own: bool, other: Any):
    q = fresh()

    def setup() -> int:
        q.enqueue({"n": 1})
        handle = q.claim_one("w")
        assert handle is not None and handle.fail("boom")
        return handle.job.id

    def verify(own: int, job: Any) -> None:
        target = own if pick_own else other
        if target == own:
            assert job is not None and (job.id, job.attempts, job.state) == (own, 0, "pending")
            assert not DeadLetter.objects.exists()
        else:
            assert job is None and DeadLetter.objects.count() == 1

    judged("requeue", lambda own: q.requeue(own if pick_own else other), verify, setup)


@PROPERTY
@given(ids=mostly(st.lists(job_ids, max_size=4), st.one_of(anything, st.just("12"))))
def test_ack_batch_acks_only_claimed_jobs_or_refuses(ids: Any):
    q = fresh()

    def setup() -> list[int]:
        jobs = q.enqueue_many([{"n": 1}, {"n": 2}])
        q.claim("w", 1)
        return [j.id for j in jobs]

    def verify(own: list[int], count: int) -> None:
        claimed = own[0]  # the claim hands out the older job first
        assert count == (1 if claimed in ids else 0)
        assert QueueMessage.objects.count() == 2 - count

    judged("ack_batch", lambda own: q.ack_batch(ids), verify, setup)


@PROPERTY
@given(states=state_choices, scheduled=st.booleans())
def test_purge_deletes_exactly_the_named_states_or_refuses(states: Any, scheduled: bool):
    q = fresh()

    def setup() -> dict[str, int]:
        q.enqueue({"n": 1})
        q.enqueue({"n": 2})
        if scheduled:
            q.enqueue({"n": 3}, delay=60)
        q.claim_one("w")
        handle = q.claim_one("w")
        assert handle is not None and handle.fail("boom")
        return {"waiting": 0, "pending": 0, "scheduled": int(scheduled), "claimed": 1, "dead": 1}

    def verify(counts: dict[str, int], purged: int) -> None:
        chosen = {states} if isinstance(states, str) else set(states)
        assert purged == sum(counts[s] for s in chosen)
        live = sum(n for s, n in counts.items() if s != "dead" and s not in chosen)
        assert QueueMessage.objects.count() == live
        assert DeadLetter.objects.count() == (0 if "dead" in chosen else 1)

    judged("purge", lambda _: q.purge(states), verify, setup)


# -- fail and stats ---------------------------------------------------------------------------


@PROPERTY
@given(
    error=st.one_of(
        st.none(),
        any_text,
        anything,
        st.integers(0, 3 * MAX_ERROR_CHARS).map(lambda n: "<" * n),
    )
)
def test_fail_dead_letters_with_the_error_text_cleaned_and_capped(error: Any):
    q = fresh()

    def setup() -> Any:
        q.enqueue({"n": 1})
        return q.claim_one("w")

    def verify(handle: Any, done: bool) -> None:
        assert done is True
        got = stored(q, handle.job.id)
        assert (got.state, got.reason) == ("dead", "failed")
        expected = clean_error_text(error)
        assert got.last_error == capped(expected if expected is not None else "failed")
        assert len(got.last_error) <= MAX_ERROR_CHARS

    judged("fail", lambda handle: handle.fail(error), verify, setup)


@PROPERTY
@given(due=st.integers(0, 4), later=st.integers(0, 3), claimed=st.integers(0, 4))
def test_stats_count_what_was_written(due: int, later: int, claimed: int):
    q = fresh()

    def setup() -> None:
        q.enqueue_many([{"n": i} for i in range(due)])
        q.enqueue_many([{"n": i} for i in range(later)], delay=60)
        q.claim("w", claimed)

    def verify(_: None, stats: Any) -> None:
        taken = min(claimed, due)
        assert (stats.pending, stats.scheduled, stats.claimed, stats.dead) == (
            due - taken, later, taken, 0,
        )  # fmt: skip

    judged("stats", lambda _: q.stats(), verify, setup)


# -- @consumer and RetryPolicy ----------------------------------------------------------------


@PROPERTY
@given(
    backoff=mostly(st.sampled_from(["exponential", "linear", "constant"]), anything),
    base=optional_durations,
    max_delay=mostly(st.floats(0, 86400), st.one_of(st.floats(), anything)),
    jitter=mostly(st.booleans(), anything),
)
def test_retry_policy_builds_or_refuses_with_invalid_option(
    backoff: Any, base: Any, max_delay: Any, jitter: Any
):
    try:
        policy = RetryPolicy(backoff, base=base, max_delay=max_delay, jitter=jitter)
    except InvalidOption:
        return
    delay = policy.delay(50, 5.0)
    assert math.isfinite(delay) and 0 <= delay <= policy.max_delay
    assert NOW + timedelta(seconds=delay) >= NOW  # a run_at can be computed from it


@PROPERTY
@given(
    name=queue_names,
    lease=optional_durations,
    max_attempts=st.one_of(st.none(), attempt_limits),
    sensitive=mostly(st.booleans(), anything),
    batch=st.one_of(st.none(), mostly(st.integers(1, 100), st.one_of(ANY_INTS, anything))),
)
def test_consumer_registers_or_refuses_registering_nothing(
    name: Any, lease: Any, max_attempts: Any, sensitive: Any, batch: Any
):
    if isinstance(name, str) and registry.get(name) is not None:
        return  # a queue of the test project's own consumers
    try:
        decorate = consumer(
            name, lease=lease, max_attempts=max_attempts, sensitive=sensitive, batch=batch
        )
    except AlkQueueError:
        assert not isinstance(name, str) or registry.get(name) is None
        return
    try:
        decorate(lambda *args: None)
        spec = registry.get(name)
        assert spec is not None and spec.sensitive is sensitive and spec.batch == batch
    finally:
        registry.unregister(name)


# -- the ALKQUEUE setting ---------------------------------------------------------------------

setting_values = st.one_of(
    st.none(),
    st.booleans(),
    ANY_INTS,
    st.floats(),
    any_text,
    st.lists(any_text, max_size=3),
    st.dictionaries(any_text, st.dictionaries(any_text, anything, max_size=2), max_size=2),
)


@PROPERTY
@given(raw=st.one_of(st.dictionaries(st.sampled_from(sorted(RULES)), setting_values), anything))
def test_the_setting_is_read_or_refused_with_improperly_configured(raw: Any):
    try:
        read = read_settings(raw)
    except ImproperlyConfigured as refused:
        assert "ALKQUEUE" in str(refused)
        return
    for key, value in (raw or {}).items():
        got = getattr(read, key)
        assert got == (tuple(value) if key == "CONSUMER_MODULES" else value)
        if isinstance(got, float):
            assert math.isfinite(got)
    assert isinstance(read.PREPARED_STATEMENTS, bool)
