"""Each option of the public API is refused with InvalidOption at the call that takes it, and
a refused call writes nothing (docs/reference.md, "Exceptions")."""

from __future__ import annotations

import random
from datetime import datetime

import pytest
from django.test import override_settings

from django_alkqueue import InvalidOption, PayloadError, Queue, queue
from django_alkqueue.models import DeadLetter, QueueMessage
from tests.clocks import FakeClock

pytestmark = pytest.mark.django_db


def rows() -> tuple[int, int]:
    return QueueMessage.objects.count(), DeadLetter.objects.count()


# -- queue() ----------------------------------------------------------------------------------


@pytest.mark.parametrize("clock", [None, "x", 5, datetime(2030, 1, 1)])
def test_a_clock_that_cannot_be_called_is_refused_by_queue(clock):
    with pytest.raises(InvalidOption, match="clock must be a callable"):
        queue("a", clock=clock)


@pytest.mark.parametrize("rng", ["x", 7, random])
def test_an_rng_that_is_not_a_random_is_refused_by_queue(rng):
    with pytest.raises(InvalidOption, match=r"rng must be a random\.Random"):
        queue("a", rng=rng)


def test_an_rng_may_be_a_system_random():
    assert isinstance(queue("a", rng=random.SystemRandom()).rng, random.SystemRandom)


def test_an_unknown_database_alias_is_refused_by_queue():
    with pytest.raises(InvalidOption, match="'nope' is not a database alias"):
        queue("a", using="nope")


@pytest.mark.parametrize("using", ["", None, 3])
def test_using_must_be_a_string_alias(using):
    with pytest.raises(InvalidOption, match="using must be a database alias"):
        Queue("a", max_attempts=5, backoff_base=5, lease=30, retention=None, priority=0,
              expires=None, using=using)  # fmt: skip


def test_the_database_setting_naming_an_unknown_alias_is_refused_by_queue():
    with (
        override_settings(ALKQUEUE={"DATABASE": "nope"}),
        pytest.raises(InvalidOption, match="'nope'"),
    ):
        queue("a")


# -- the clock's readings ---------------------------------------------------------------------


def test_a_clock_returning_a_naive_datetime_is_refused_at_the_enqueue_writing_nothing():
    naive = queue("a", clock=FakeClock(datetime(2030, 1, 1, 12)))
    before = rows()
    with pytest.raises(InvalidOption, match="naive datetime"):
        naive.enqueue({"n": 1})
    with pytest.raises(InvalidOption, match="naive datetime"):
        naive.enqueue_many([{"n": 1}, {"n": 2}])
    assert rows() == before


def test_a_clock_returning_something_else_is_refused_at_the_enqueue():
    broken = queue("a", clock=lambda: "2030-01-01")
    with pytest.raises(InvalidOption, match="returned str, not a datetime"):
        broken.enqueue(1)
    assert rows() == (0, 0)


@override_settings(USE_TZ=False)
def test_with_use_tz_off_a_clock_returning_an_aware_datetime_is_refused(clock):
    with pytest.raises(InvalidOption, match="aware datetime"):
        queue("a", clock=clock).enqueue(1)
    assert rows() == (0, 0)


def test_a_clock_returning_a_naive_datetime_is_refused_at_the_claim(q):
    q.enqueue(1)
    naive = queue("q", clock=FakeClock(datetime(2030, 1, 1, 12)))
    with pytest.raises(InvalidOption, match="naive datetime"):
        naive.claim("w")
    assert q.claim("w")[0].job.attempts == 1  # the refused claim took nothing


def test_a_clock_returning_a_naive_datetime_is_refused_at_the_requeue_and_sweep(q):
    q.enqueue(1)
    q.claim_one("w").fail("boom")
    naive = queue("q", clock=FakeClock(datetime(2030, 1, 1, 12)))
    before = rows()
    with pytest.raises(InvalidOption, match="naive datetime"):
        naive.requeue(DeadLetter.objects.get().job_id)
    with pytest.raises(InvalidOption, match="naive datetime"):
        naive.sweep_expired()
    assert rows() == before


# -- purge ------------------------------------------------------------------------------------


@pytest.mark.parametrize("states", [None, 5, b"pending", {"pending": 1}])
def test_purge_refuses_what_is_not_a_state_or_states(q, states):
    q.enqueue(1)
    with pytest.raises(InvalidOption, match="states must be a state name"):
        q.purge(states)
    assert rows() == (1, 0)


@pytest.mark.parametrize("states", [["pending", 5], ["done"], "everything", [None]])
def test_purge_refuses_an_unknown_state(q, states):
    q.enqueue(1)
    with pytest.raises(InvalidOption, match="unknown state"):
        q.purge(states)
    assert rows() == (1, 0)


def test_purge_takes_one_state_name_or_an_iterable(q):
    q.enqueue(1)
    q.enqueue(2)
    assert q.purge("pending") == 2
    assert q.purge(iter(["pending", "scheduled"])) == 0


# -- @consumer and RetryPolicy ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"backoff": "fibonacci"}, "unknown backoff"),
        ({"base": "5"}, "base must be"),
        ({"base": float("inf")}, "base must be"),
        ({"base": -1}, "base must be"),
        ({"max_delay": float("inf")}, "max_delay must be"),
        ({"max_delay": True}, "max_delay must be"),
        ({"jitter": "no"}, "jitter must be True or False"),
        ({"retry_on": TimeoutError}, "retry_on must be a tuple"),
        ({"retry_on": ("TimeoutError",)}, "retry_on must be a tuple"),
    ],
)
def test_retry_policy_refuses_bad_options_with_invalid_option(options, named):
    from django_alkqueue import RetryPolicy

    with pytest.raises(InvalidOption, match=named):
        RetryPolicy(**options)


def test_retry_policy_takes_a_timedelta_base():
    from datetime import timedelta

    from django_alkqueue import RetryPolicy

    assert RetryPolicy(base=timedelta(seconds=3), jitter=False).delay(1, 5) == 3.0


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"retry": "exponential"}, "retry must be a RetryPolicy"),
        ({"atomic": 1}, "atomic must be True or False"),
    ],
)
def test_consumer_refuses_bad_options_with_invalid_option(options, named):
    from django_alkqueue import consumer
    from django_alkqueue.consumers import registry

    with pytest.raises(InvalidOption, match=named):
        consumer("never-registered", **options)
    assert registry.get("never-registered") is None


# -- numbers too long to print or to make a float of ----------------------------------------

#: Python refuses to print an int of more than 4,300 digits (ValueError) and to make a float of
#: one past 1.8e308 (OverflowError): each option refuses them with InvalidOption all the same.
HUGE = [10**5000, -(10**5000), 10**400]
HUGE_IDS = ["10**5000", "-10**5000", "10**400"]


@pytest.mark.parametrize("number", HUGE, ids=HUGE_IDS)
@pytest.mark.parametrize("option", ["priority", "delay", "expires", "max_attempts"])
def test_enqueue_refuses_a_huge_number_with_invalid_option_and_writes_nothing(option, number):
    with pytest.raises(InvalidOption, match=option):
        queue("emails").enqueue({}, **{option: number})
    assert rows() == (0, 0)


@pytest.mark.parametrize("number", HUGE, ids=HUGE_IDS)
@pytest.mark.parametrize("option", ["max_attempts", "lease", "backoff_base", "priority"])
def test_queue_refuses_a_huge_number_with_invalid_option(option, number):
    with pytest.raises(InvalidOption, match=option):
        queue("emails", **{option: number})


@pytest.mark.parametrize("number", HUGE, ids=HUGE_IDS)
@pytest.mark.parametrize("call", ["get_job", "cancel", "requeue"])
def test_a_huge_job_id_is_refused_with_invalid_option(call, number):
    with pytest.raises(InvalidOption, match="job id"):
        getattr(queue("emails"), call)(number)


def _consumer(**options):
    from django_alkqueue import consumer

    return consumer("never-registered", **options)


def _policy(**options):
    from django_alkqueue import RetryPolicy

    return RetryPolicy(**options)


@pytest.mark.parametrize(
    ("call", "refused"),
    [
        pytest.param(lambda: queue("emails").purge([10**5000]), InvalidOption, id="purge"),
        pytest.param(lambda: _consumer(sensitive=10**5000), InvalidOption, id="sensitive"),
        pytest.param(lambda: _consumer(atomic=10**5000), InvalidOption, id="atomic"),
        pytest.param(lambda: _policy(backoff=10**5000), InvalidOption, id="backoff"),
        pytest.param(lambda: _policy(jitter=10**5000), InvalidOption, id="jitter"),
        pytest.param(lambda: queue("emails").enqueue({10**5000: 1}), PayloadError, id="key"),
    ],
)
def test_a_value_too_long_to_print_is_refused_with_the_documented_exception(call, refused):
    """The refusal's message names such a value by its size: printing it would raise."""
    with pytest.raises(refused, match="an int of about 5001 digits"):
        call()
    assert rows() == (0, 0)
