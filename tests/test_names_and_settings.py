"""Queue names, queue options and the ALKQUEUE setting."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_alkqueue import InvalidName, InvalidOption, queue
from django_alkqueue.conf import get_settings


@pytest.mark.parametrize(
    "name", ["a", "shop-emails", "Z9", "billing.invoices:eu-west_1", "x" * 100, "0day"]
)
def test_valid_queue_names(name):
    assert queue(name).name == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "invalid"),
        ("x" * 101, "invalid"),
        ("_internal", "reserved"),
        ("-dash", "invalid"),
        (".dot", "invalid"),
        ("has space", "invalid"),
        ("emoji✓", "invalid"),
        ("new\nline", "invalid"),
        ("<script>", "invalid"),
        (None, "string"),
        (42, "string"),
    ],
)
def test_bad_queue_names_raise_invalid_name(name, why):
    with pytest.raises(InvalidName, match=why) as info:
        queue(name)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 0},
        {"max_attempts": -3},
        {"max_attempts": "5"},
        {"backoff_base": -1},
        {"lease": 0},
        {"lease": -30},
        {"lease": timedelta(seconds=-1)},
        {"retention": -1},
        {"priority": 200},
        {"expires": float("nan")},
    ],
)
def test_bad_queue_options_raise_value_error(options):
    with pytest.raises(InvalidOption) as info:
        queue("ok", **options)
    assert isinstance(info.value, ValueError)


def test_building_a_queue_runs_no_query():
    # No django_db mark: pytest-django raises on any database access here.
    q = queue("free", max_attempts=2, lease=timedelta(minutes=1))
    assert q.lease == 60.0


def test_queue_defaults():
    q = queue("defaults")
    assert (q.max_attempts, q.backoff_base, q.lease, q.priority, q.expires) == (
        5, 5.0, 30.0, 0, None,
    )  # fmt: skip
    assert q.retention == timedelta(days=7).total_seconds()
    assert q.using == "default"


def test_using_defaults_to_the_database_setting():
    with override_settings(ALKQUEUE={"DATABASE": "other"}):
        assert queue("x").using == "other"
    assert queue("x", using="other").using == "other"


def test_settings_are_read_when_used_so_override_settings_applies():
    assert get_settings().MAX_PAYLOAD_BYTES == 1024 * 1024
    with override_settings(ALKQUEUE={"MAX_PAYLOAD_BYTES": 10}):
        assert get_settings().MAX_PAYLOAD_BYTES == 10
    assert get_settings().MAX_PAYLOAD_BYTES == 1024 * 1024


def test_an_unknown_setting_key_is_an_error_listing_the_valid_ones():
    with (
        override_settings(ALKQUEUE={"MAX_PAYLOAD": 10}),
        pytest.raises(ImproperlyConfigured, match=r"MAX_PAYLOAD\b.*MAX_PAYLOAD_BYTES"),
    ):
        get_settings()


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 0},
        {"lease": -5.0},
        {"lease": 0},
        {"priority": 5000},
        {"backoff_base": float("nan")},
        {"retention": -1},
        {"expires": -1},
        {"using": ""},
    ],
)
def test_a_queue_built_directly_checks_its_options_as_queue_does(options):
    from django_alkqueue import Queue

    stamps = {"max_attempts": 5, "backoff_base": 5, "lease": 30, "retention": None,
              "priority": 0, "expires": None, "using": "default", **options}  # fmt: skip
    with pytest.raises(InvalidOption):
        Queue("direct", **stamps)


def test_a_queue_built_directly_checks_its_name():
    from django_alkqueue import Queue

    with pytest.raises(InvalidName):
        Queue("<b>bad name", max_attempts=5, backoff_base=5, lease=30, retention=None,
              priority=0, expires=None, using="default")  # fmt: skip
