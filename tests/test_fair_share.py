"""Fair share between fair keys (issue 52), in one process: the input rules, and the order in
which direct claim calls hand out the jobs of several keys. The real worker's drains are in
tests/test_fair_share_workers.py."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_alkqueue import fair_share
from django_alkqueue.conf import read_settings
from django_alkqueue.consumers import consumer, registry
from django_alkqueue.exceptions import InvalidOption
from django_alkqueue.models import ClaimGate, Consumer, QueueMessage
from django_alkqueue.operations import fair_share_in_force
from django_alkqueue.queues import Queue

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "fair"
BAD_KEYS = ["", "k" * 256, "a\x00b", "a\ud800b", 5, b"bytes"]


@pytest.fixture(autouse=True)
def fresh_state() -> Iterator[None]:
    yield
    registry.unregister(QUEUE)


@pytest.fixture
def fq(make_queue: Callable[..., Queue]) -> Queue:
    return make_queue(QUEUE)


def with_consumer_row(name: str = QUEUE) -> None:
    Consumer.objects.create(queue=name, handler="tests.fair", lease=30, max_attempts=3)


def keys_claimed(queue: Queue, n: int = 1, times: int = 1) -> list[str | None]:
    """The fair keys of the jobs `times` claims of `n` hand out, in handout order (each
    payload is its key)."""
    keys = []
    for _ in range(times):
        keys.extend(handle.job.payload for handle in queue.claim("w", n))
    return keys


# -- input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_KEYS, ids=repr)
def test_enqueue_refuses_a_bad_fair_key_and_writes_nothing(fq: Queue, bad: Any) -> None:
    with pytest.raises(InvalidOption, match="fair_key"):
        fq.enqueue(1, fair_key=bad)
    assert not QueueMessage.objects.exists()


@pytest.mark.parametrize("bad", BAD_KEYS, ids=repr)
def test_enqueue_many_refuses_a_bad_fair_key_from_its_callable(fq: Queue, bad: Any) -> None:
    with pytest.raises(InvalidOption, match=r"payloads\[1\]: fair_key"):
        fq.enqueue_many([1, 2, 3], fair_key=lambda p: "ok" if p != 2 else bad)
    assert not QueueMessage.objects.exists()


def test_enqueue_stores_the_fair_key_on_the_row(fq: Queue) -> None:
    job = fq.enqueue(1, fair_key="tenant-42")
    assert QueueMessage.objects.get(id=job.id).fair_key == "tenant-42"


def test_enqueue_many_stores_one_key_or_each_payloads_key(fq: Queue) -> None:
    one = fq.enqueue_many([1, 2], fair_key="t")
    each = fq.enqueue_many(["a", "b", None], fair_key=lambda p: p, concurrency_key="c")
    rows = dict(QueueMessage.objects.values_list("id", "fair_key"))
    assert [rows[job.id] for job in one + each] == ["t", "t", "a", "b", None]
    assert {job.concurrency_key for job in each} == {"c"}


def test_aenqueue_takes_a_fair_key(fq: Queue) -> None:
    job = async_to_sync(fq.aenqueue)(1, fair_key="t")
    assert QueueMessage.objects.filter(id=job.id, fair_key="t").exists()


@pytest.mark.parametrize("bad", [0, 1001, 2.0, True, "3"], ids=repr)
def test_set_fair_weight_refuses_a_bad_weight_and_writes_nothing(fq: Queue, bad: Any) -> None:
    with_consumer_row()
    with pytest.raises(InvalidOption, match="fair weight"):
        fq.set_fair_weight("gold", bad)
    assert Consumer.objects.get(queue=QUEUE).fair_weights == {}


def test_set_fair_weight_needs_the_consumer_row(fq: Queue) -> None:
    with pytest.raises(InvalidOption, match="no Consumer row"):
        fq.set_fair_weight("gold", 3)


def test_set_fair_weight_none_drops_the_weight(fq: Queue) -> None:
    with_consumer_row()
    assert fq.set_fair_weight("gold", 5) == 5
    assert fq.set_fair_weight("gold", None) == 1
    assert Consumer.objects.get(queue=QUEUE).fair_weights == {}


def test_settings_refuse_a_bad_fair_weight() -> None:
    with pytest.raises(ImproperlyConfigured, match="fair_weights"):
        read_settings({"QUEUES": {QUEUE: {"fair_weights": {"gold": 0}}}})


# -- the turns -----------------------------------------------------------------------------


def test_the_dialects_probe_sees_only_unclaimed_jobs_with_a_fair_key(fq: Queue) -> None:
    fq.enqueue({"i": 0})
    assert fair_share_in_force(QUEUE) is None
    fq.enqueue({"i": 1}, fair_key="a")
    assert fair_share_in_force(QUEUE) == fair_share.FairShare({})
    fq.claim("w", 2)
    assert fair_share_in_force(QUEUE) is None


def test_claims_take_turns_between_keys(fq: Queue) -> None:
    fq.enqueue_many(["a"] * 6, fair_key="a")
    fq.enqueue_many(["b"] * 2, fair_key="b")
    fq.enqueue_many(["c"] * 2, fair_key="c")
    assert keys_claimed(fq, times=10) == ["a", "b", "c", "a", "b", "c", "a", "a", "a", "a"]


def test_one_claim_of_several_jobs_takes_turns_too(fq: Queue) -> None:
    fq.enqueue_many(["a"] * 6, fair_key="a")
    fq.enqueue_many(["b"] * 2, fair_key="b")
    assert keys_claimed(fq, n=4) == ["a", "b", "a", "b"]


def test_the_jobs_without_a_fair_key_form_one_key(fq: Queue) -> None:
    fq.enqueue_many([None] * 4)
    fq.enqueue_many(["a"] * 2, fair_key="a")
    assert keys_claimed(fq, times=5) == [None, "a", None, "a", None]


def test_priority_comes_before_the_turns(fq: Queue) -> None:
    fq.enqueue_many(["a"] * 3, fair_key="a")
    fq.enqueue_many(["b"] * 3, fair_key="b", priority=5)
    assert keys_claimed(fq, times=4) == ["b", "b", "b", "a"]


def test_a_key_that_arrives_late_takes_turns_from_then_on(fq: Queue) -> None:
    fq.enqueue_many(["a"] * 10, fair_key="a")
    assert keys_claimed(fq, times=3) == ["a", "a", "a"]
    fq.enqueue_many(["b"] * 3, fair_key="b")
    assert keys_claimed(fq, times=6) == ["b", "a", "b", "a", "b", "a"]


def test_a_queue_claimed_without_turns_takes_them_at_its_next_claim_after_a_fair_key(
    fq: Queue,
) -> None:
    fq.enqueue_many([None] * 4)
    assert keys_claimed(fq) == [None]
    fq.enqueue_many(["a"] * 2, fair_key="a")
    assert keys_claimed(fq, n=2) == [None, "a"]


def test_a_weight_of_three_takes_three_jobs_a_round(fq: Queue) -> None:
    with_consumer_row()
    fq.set_fair_weight("a", 3)
    fq.enqueue_many(["a"] * 12, fair_key="a")
    fq.enqueue_many(["b"] * 12, fair_key="b")
    assert Counter(keys_claimed(fq, times=16)) == {"a": 12, "b": 4}


def test_the_settings_weights_apply(fq: Queue) -> None:
    with override_settings(ALKQUEUE={"QUEUES": {QUEUE: {"fair_weights": {"a": 3}}}}):
        fq.enqueue_many(["a"] * 9, fair_key="a")
        fq.enqueue_many(["b"] * 9, fair_key="b")
        assert Counter(keys_claimed(fq, n=8)) == {"a": 6, "b": 2}


def test_key_concurrency_decides_how_many_and_the_turns_which(fq: Queue) -> None:
    consumer(QUEUE, key_concurrency=1)(lambda payload, job: None)
    fq.enqueue_many(["a"] * 3, fair_key="a", concurrency_key="x")
    fq.enqueue_many(["b"] * 3, fair_key="b")
    assert keys_claimed(fq, n=4) == ["a", "b", "b", "b"]


def test_a_rate_decides_how_many_and_the_turns_which(fq: Queue) -> None:
    consumer(QUEUE, rate="3/h")(lambda payload, job: None)
    fq.enqueue_many(["a"] * 5, fair_key="a")
    fq.enqueue_many(["b"] * 5, fair_key="b")
    assert keys_claimed(fq, n=10) == ["a", "b", "a"]
    assert keys_claimed(fq, n=10) == []


def test_a_queue_without_fair_keys_keeps_its_plain_claim(fq: Queue) -> None:
    fq.enqueue_many([1, 2, 3])
    assert len(fq.claim("w", 3)) == 3
    assert not ClaimGate.objects.filter(queue=QUEUE).exists()


def test_fair_share_keeps_no_reading_at_module_level() -> None:
    # Each worker keeps its own (worker/flow_state.py); Queue.claim reads for each claim.
    kept = (fair_share.FairShareCache, fair_share.FairShare, dict, list, set)
    public = {name: value for name, value in vars(fair_share).items() if name[0] != "_"}
    assert [name for name, value in public.items() if isinstance(value, kept)] == []


# -- the rule, for random mixes ------------------------------------------------------------

mixes = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(1, 6)), min_size=1, max_size=4
)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    mix=mixes,
    weights=st.fixed_dictionaries({k: st.integers(1, 3) for k in "abc"}),
    sizes=st.lists(st.integers(1, 3), min_size=1, max_size=5),
)
def test_no_key_gets_a_job_of_a_later_round_before_the_others_got_theirs(
    make_queue: Callable[..., Queue],
    mix: list[tuple[str | None, int]],
    weights: dict[str, int],
    sizes: list[int],
) -> None:
    name = f"fair-{uuid.uuid4().hex[:12]}"
    fq = make_queue(name)
    for key, count in mix:
        fq.enqueue_many([key] * count, fair_key=key)
    ready = Counter(QueueMessage.objects.filter(queue=name).values_list("fair_key", flat=True))
    with override_settings(ALKQUEUE={"QUEUES": {name: {"fair_weights": weights}}}):
        handed: Counter[str | None] = Counter()
        while ready - handed:
            for key in keys_claimed(fq, n=sizes[sum(handed.values()) % len(sizes)]):
                handed[key] += 1
                weight = 1 if key is None else weights[key]
                this_round = math.ceil(handed[key] / weight)
                for other in ready - handed:
                    other_weight = 1 if other is None else weights[other]
                    assert handed[other] >= (this_round - 1) * other_weight, (key, handed)
