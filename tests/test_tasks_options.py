"""What validate_task lets through enqueues; QUEUE_OPTIONS beside or inside OPTIONS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.test import override_settings

from django_alkqueue.backend import AlkQueueBackend
from django_alkqueue.models import QueueMessage
from django_alkqueue.tasks_compat import InvalidTask
from testproject.shop import tasks

pytestmark = pytest.mark.django_db

BACKEND = "django_alkqueue.backend.AlkQueueBackend"


# -- validate_task ----------------------------------------------------------------------------


def test_a_run_after_too_far_for_a_job_is_an_invalid_task():
    with pytest.raises(InvalidTask, match="36500 days"):
        tasks.add.using(run_after=datetime(2200, 1, 1, tzinfo=UTC))
    assert not QueueMessage.objects.exists()


@override_settings(USE_TZ=False)
def test_an_aware_run_after_without_use_tz_is_an_invalid_task():
    with pytest.raises(InvalidTask, match="naive"):
        tasks.add.using(run_after=datetime(2030, 1, 1, tzinfo=UTC))
    assert not QueueMessage.objects.exists()


@override_settings(USE_TZ=False)
def test_a_naive_run_after_without_use_tz_enqueues():
    later = datetime.now() + timedelta(hours=1)
    result = tasks.add.using(run_after=later).enqueue(1, 1)
    assert QueueMessage.objects.get(pk=int(result.id)).run_at == later


def test_a_whole_float_priority_enqueues_as_an_int():
    result = tasks.add.using(priority=10.0).enqueue(1, 1)
    assert QueueMessage.objects.get(pk=int(result.id)).priority == 10


# -- QUEUE_OPTIONS ----------------------------------------------------------------------------


def test_queue_options_may_be_given_inside_options():
    backend = AlkQueueBackend("x", {"OPTIONS": {
        "max_attempts": 5, "QUEUE_OPTIONS": {"emails": {"max_attempts": 10}}}})  # fmt: skip
    assert backend.job_options("emails")["max_attempts"] == 10
    assert backend.job_options("default")["max_attempts"] == 5


def test_queue_options_inside_options_stamp_the_queues_jobs():
    backend = {**settings.TASKS["default"], "OPTIONS": {
        "QUEUE_OPTIONS": {"tasks-high": {"max_attempts": 9}}}}  # fmt: skip
    with override_settings(TASKS={"default": backend}):
        result = tasks.urgent.enqueue("now")
    assert QueueMessage.objects.get(pk=int(result.id)).max_attempts == 9


def test_queue_options_in_both_places_are_refused():
    with pytest.raises(InvalidTask, match="both beside OPTIONS and inside it"):
        AlkQueueBackend("x", {"QUEUE_OPTIONS": {}, "OPTIONS": {"QUEUE_OPTIONS": {}}})


def test_unknown_options_inside_queue_options_inside_options_are_refused():
    with pytest.raises(InvalidTask, match="unknown OPTIONS"):
        AlkQueueBackend("x", {"OPTIONS": {"QUEUE_OPTIONS": {"emails": {"max_attempt": 3}}}})


# -- the values of OPTIONS are checked when the backend is built ------------------------------


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"backoff_base": -1}, "backoff_base"),
        ({"lease": 0}, "lease"),
        ({"lease": float("inf")}, "lease"),
        ({"result_retention": "a day"}, "result_retention"),
        ({"QUEUE_OPTIONS": {"emails": {"lease": -5}}}, "lease"),
    ],
)
def test_a_bad_option_value_is_refused_when_the_backend_is_built(options, named):
    with pytest.raises(InvalidTask, match=f"task backend 'x': {named}"):
        AlkQueueBackend("x", {"OPTIONS": options})


@pytest.mark.parametrize(
    "params",
    [
        {"OPTIONS": ["max_attempts", 3]},
        {"QUEUE_OPTIONS": ["emails"]},
        {"QUEUE_OPTIONS": {"emails": 3}},
    ],
)
def test_options_that_are_not_dicts_are_refused(params):
    with pytest.raises(InvalidTask, match="must be a dict"):
        AlkQueueBackend("x", params)


def test_the_defaults_are_the_librarys_own():
    from django_alkqueue import defaults

    options = AlkQueueBackend("x", {}).options_for("emails")
    assert options == {
        "max_attempts": defaults.MAX_ATTEMPTS,
        "backoff_base": defaults.BACKOFF_BASE,
        "lease": defaults.LEASE,
        "result_retention": defaults.RESULT_RETENTION,
    }
