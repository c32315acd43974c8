"""@consumer, the registry, retry policies and the system check."""

from __future__ import annotations

import random

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from django_alkqueue import InvalidName, RetryPolicy, consumer, queue
from django_alkqueue.consumers import ConsumerRegistry, registry


@pytest.fixture
def scratch_queue():
    """A queue name whose registration is removed after the test."""
    name = "scratch-queue"
    yield name
    registry.unregister(name)


def test_consumer_registers_its_handler(scratch_queue):
    @consumer(scratch_queue, lease=60, max_attempts=8)
    def handler(payload, job):
        return None

    spec = registry.get(scratch_queue)
    assert spec.handler is handler
    assert spec.path.endswith("test_consumer_registers_its_handler.<locals>.handler")
    assert (spec.lease, spec.max_attempts, spec.atomic) == (60.0, 8, False)


def test_a_second_consumer_for_a_queue_names_both_handlers(scratch_queue):
    @consumer(scratch_queue)
    def first(payload, job):
        return None

    with pytest.raises(ImproperlyConfigured, match=r"first.*second|second.*first") as info:

        @consumer(scratch_queue)
        def second(payload, job):
            return None

    assert "first" in str(info.value) and "second" in str(info.value)


def test_consumer_validates_the_queue_name_at_decoration_time():
    with pytest.raises(InvalidName):
        consumer("_reserved")


def test_unknown_backoff_name_raises_value_error_at_decoration_time():
    with pytest.raises(ValueError, match="backoff"):
        RetryPolicy(backoff="fibonacci")


def test_the_default_policy_is_the_core_curve():
    policy = RetryPolicy()
    rng = random.Random(3)
    for attempt in range(1, 12):
        cap = min(5 * 2 ** (attempt - 1), 3600)
        assert cap / 2 <= policy.delay(attempt, 5, rng) <= cap


def test_linear_and_constant_policies_without_jitter():
    assert RetryPolicy("linear", base=10, jitter=False).delay(4, 5) == 40
    assert RetryPolicy("constant", base=7, jitter=False).delay(9, 5) == 7
    assert RetryPolicy("linear", base=10, max_delay=25, jitter=False).delay(4, 5) == 25


def test_policy_base_defaults_to_the_job_backoff_base():
    assert RetryPolicy(jitter=False).delay(3, 2) == 8


def test_retry_on_limits_which_errors_retry():
    policy = RetryPolicy(retry_on=(TimeoutError,))
    assert policy.retries(TimeoutError())
    assert not policy.retries(KeyError())
    assert RetryPolicy().retries(KeyError())


def test_consumer_options_are_the_stamps_of_its_queue(scratch_queue):
    @consumer(scratch_queue, lease=90, max_attempts=8, retry=RetryPolicy(base=2))
    def handler(payload, job):
        return None

    q = queue(scratch_queue)
    assert (q.lease, q.max_attempts, q.backoff_base) == (90.0, 8, 2.0)
    explicit = queue(scratch_queue, lease=10, max_attempts=2, backoff_base=1)
    assert (explicit.lease, explicit.max_attempts, explicit.backoff_base) == (10.0, 2, 1.0)


def test_queues_without_a_consumer_keep_the_core_defaults():
    q = queue("nobody-consumes-this")
    assert (q.lease, q.max_attempts, q.backoff_base) == (30.0, 5, 5.0)


def test_autodiscovery_records_a_duplicate_instead_of_raising(monkeypatch):
    fresh = ConsumerRegistry()
    monkeypatch.setattr("django_alkqueue.consumers.registry", fresh)
    fresh.autodiscover(("tests.duplicate_consumers",))
    assert len(fresh.errors) == 1
    assert "first_handler" in fresh.errors[0] and "second_handler" in fresh.errors[0]


def test_the_system_check_reports_a_duplicate_consumer(monkeypatch):
    monkeypatch.setattr(registry, "errors", ["queue 'x' has two consumers: a.f and b.g"])
    errors = [m for m in checks.run_checks(tags=["alkqueue"]) if m.id == "alkqueue.E001"]
    assert len(errors) == 1
    assert "a.f" in errors[0].msg and "b.g" in errors[0].msg


def test_manage_py_check_fails_naming_both_handlers(transactional_db):
    # No transaction of the test's open: on SQLite it would hold the write lock, and the
    # subprocess's check would wait out its 30 s busy timeout for it.
    from tests.workers import run_manage

    result = run_manage(
        "check", env_extra={"ALKQUEUE_EXTRA_CONSUMERS": "tests.duplicate_consumers"}
    )
    assert result.returncode != 0
    assert "alkqueue.E001" in result.stderr
    assert "first_handler" in result.stderr and "second_handler" in result.stderr
