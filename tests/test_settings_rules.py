"""The ALKQUEUE setting is checked when it is read: each key's type and range, with an
ImproperlyConfigured that names the key, the value and what is expected; `manage.py check`
reports the same as alkqueue.E003 (docs/checks.md)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_alkqueue.conf import QUEUE_OPTION_RULES, RULES, get_settings, read_settings


def refused(raw: Any) -> str:
    with pytest.raises(ImproperlyConfigured) as info:
        read_settings(raw)
    return str(info.value)


# -- the setting as a whole -------------------------------------------------------------------


def test_alkqueue_absent_or_empty_gives_the_defaults():
    assert read_settings(None) == read_settings({})
    assert read_settings({}).MAX_PAYLOAD_BYTES == 1024 * 1024


def test_alkqueue_that_is_not_a_dict_is_refused():
    message = refused([("MAX_PAYLOAD_BYTES", 10)])
    assert "ALKQUEUE must be a dict" in message and "list" in message


def test_every_setting_has_a_rule():
    from django_alkqueue.conf import _FIELDS

    assert set(RULES) == _FIELDS


# -- one test per rule ------------------------------------------------------------------------


def test_max_payload_bytes_must_be_an_int_not_a_string():
    message = refused({"MAX_PAYLOAD_BYTES": "big"})
    assert "ALKQUEUE['MAX_PAYLOAD_BYTES'] is 'big'" in message and "an int in 1.." in message


@pytest.mark.parametrize("value", [-1, 0, 2**30 + 1])
def test_max_payload_bytes_must_be_in_range(value):
    assert f"is {value}; expected an int in 1..1073741824" in refused({"MAX_PAYLOAD_BYTES": value})


def test_consumer_modules_must_be_a_list_not_one_string():
    message = refused({"CONSUMER_MODULES": "shop.consumers"})
    assert "CONSUMER_MODULES" in message and "'shop.consumers'" in message
    assert "a list or tuple of dotted module names" in message


def test_consumer_modules_must_hold_non_empty_strings():
    assert "CONSUMER_MODULES" in refused({"CONSUMER_MODULES": ["shop.consumers", 3]})
    assert "CONSUMER_MODULES" in refused({"CONSUMER_MODULES": [""]})


def test_consumer_modules_given_as_a_list_is_kept_as_a_tuple():
    assert read_settings({"CONSUMER_MODULES": ["a.b"]}).CONSUMER_MODULES == ("a.b",)


def test_ack_window_must_be_a_number_of_seconds():
    message = refused({"ACK_WINDOW": "fast"})
    assert "ALKQUEUE['ACK_WINDOW'] is 'fast'; expected a number of seconds >= 0" in message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_duration_must_be_finite(value):
    assert "RECLAIM_INTERVAL" in refused({"RECLAIM_INTERVAL": value})


def test_an_interval_must_be_positive():
    assert "expected a number of seconds > 0" in refused({"SWEEP_INTERVAL": 0})


def test_a_window_may_be_zero():
    assert read_settings({"ACK_WINDOW": 0, "NOTIFY_WINDOW": 0}).ACK_WINDOW == 0.0


def test_a_negative_window_is_refused():
    assert "NOTIFY_WINDOW" in refused({"NOTIFY_WINDOW": -0.5})


@pytest.mark.parametrize(
    "raw",
    [
        {"RECLAIM_INTERVAL": 10**5000},
        {"MAX_PAYLOAD_BYTES": 10**5000},
        {"VACUUM_DEAD_TUPLES": -(10**5000)},
        {"QUEUES": {"q": {"rate": "9" * 5000 + "/s"}}},
        {"QUEUES": {"q": {"key_rate": (5, 10**400)}}},
        {"QUEUES": {"q": {"timeout": 10**5000}}},
        10**5000,
        {10**5000: 1},
        {"QUEUES": {10**5000: {}}},
        {"QUEUES": {"q": {10**5000: 1}}},
    ],
    ids=lambda raw: "raw",
)
def test_a_number_too_long_to_print_is_refused_as_improperly_configured(raw):
    """Python refuses to print an int of more than 4,300 digits (ValueError) and to make a
    float of one past 1.8e308 (OverflowError): refused all the same, the message naming its
    size instead of the number."""
    assert "ALKQUEUE" in refused(raw)


def test_a_duration_beyond_a_century_is_refused():
    assert "WORKER_PRUNE_AFTER" in refused({"WORKER_PRUNE_AFTER": 1e300})


def test_a_bool_is_not_a_number():
    assert "STATS_RETENTION" in refused({"STATS_RETENTION": True})
    assert "MAX_PAYLOAD_BYTES" in refused({"MAX_PAYLOAD_BYTES": True})


def test_a_flag_given_as_an_int_is_refused():
    message = refused({"PREPARED_STATEMENTS": 1})
    assert "ALKQUEUE['PREPARED_STATEMENTS'] is 1; expected True or False" in message


def test_vacuum_dead_tuples_is_none_or_a_positive_int():
    assert read_settings({"VACUUM_DEAD_TUPLES": None}).VACUUM_DEAD_TUPLES is None
    assert "VACUUM_DEAD_TUPLES" in refused({"VACUUM_DEAD_TUPLES": 0})
    assert "VACUUM_DEAD_TUPLES" in refused({"VACUUM_DEAD_TUPLES": 1.5})


@pytest.mark.parametrize("key", ["DATABASE", "LISTEN_DATABASE"])
def test_a_database_alias_must_be_a_non_empty_string(key):
    assert key in refused({key: ""})
    assert key in refused({key: 5})


def test_listen_database_may_be_none():
    assert read_settings({"LISTEN_DATABASE": None}).LISTEN_DATABASE is None


def test_periodic_must_be_a_dict_of_dicts():
    assert "PERIODIC" in refused({"PERIODIC": [{"cron": "* * * * *"}]})
    assert "PERIODIC" in refused({"PERIODIC": {"nightly": "0 3 * * *"}})


def test_queues_must_be_a_dict():
    assert "ALKQUEUE['QUEUES'] is ['emails']" in refused({"QUEUES": ["emails"]})


def test_queues_names_must_be_valid_queue_names():
    message = refused({"QUEUES": {"_ours": {"sensitive": True}}})
    assert "QUEUES" in message and "reserved" in message


def test_a_queues_options_must_be_a_dict():
    assert "ALKQUEUE['QUEUES']['emails'] is True" in refused({"QUEUES": {"emails": True}})


def test_an_unknown_queue_option_is_refused_listing_the_valid_ones():
    message = refused({"QUEUES": {"emails": {"sensitve": True}}})
    assert "ALKQUEUE['QUEUES']['emails'] has unknown option(s) 'sensitve'" in message
    valid = "concurrency, fair_weights, keep, key_concurrency, key_rate, rate, sensitive"
    assert f"valid options are {valid}" in message


def test_sensitive_must_be_a_bool():
    message = refused({"QUEUES": {"emails": {"sensitive": "yes"}}})
    assert "ALKQUEUE['QUEUES']['emails']['sensitive'] is 'yes'; expected True or False" in message


def test_every_queue_option_has_a_rule():
    assert set(QUEUE_OPTION_RULES) == {
        "sensitive",
        "concurrency",
        "key_concurrency",
        "rate",
        "key_rate",
        "timeout",
        "keep",
        "fair_weights",
    }


# -- where the rules are applied --------------------------------------------------------------


def test_get_settings_applies_the_rules():
    with (
        override_settings(ALKQUEUE={"MAX_PAYLOAD_BYTES": "big"}),
        pytest.raises(ImproperlyConfigured, match="MAX_PAYLOAD_BYTES"),
    ):
        get_settings()


def _check_ids() -> list[str]:
    return [m.id for m in checks.run_checks(tags=["alkqueue"]) if m.id]


def test_the_system_check_reports_a_bad_setting_as_e003():
    with override_settings(ALKQUEUE={"ACK_WINDOW": "fast"}):
        errors = [m for m in checks.run_checks(tags=["alkqueue"]) if m.id == "alkqueue.E003"]
    assert len(errors) == 1
    assert "ACK_WINDOW" in errors[0].msg and "docs/checks.md" in (errors[0].hint or "")


def test_the_system_check_reports_every_bad_queue_name_option_and_value_at_once():
    queues = {"emails": {"concurrency": 0, "rate": "fast", "colour": "red"}, "bad name": {},
              "reports": "sensitive"}  # fmt: skip
    with override_settings(ALKQUEUE={"ACK_WINDOW": "fast", "QUEUES": queues}):
        errors = [m.msg for m in checks.run_checks(tags=["alkqueue"]) if m.id == "alkqueue.E003"]
    assert errors == [
        "ALKQUEUE['ACK_WINDOW'] is 'fast'; expected a number of seconds >= 0, at most 3153600000.",
        "ALKQUEUE['QUEUES']['emails'] has unknown option(s) 'colour'; valid options are "
        "concurrency, fair_weights, keep, key_concurrency, key_rate, rate, sensitive, timeout.",
        "ALKQUEUE['QUEUES']['emails']['concurrency']: concurrency must be in 1..100000, got 0.",
        "ALKQUEUE['QUEUES']['emails']['rate']: rate must be written \"N/s\", \"N/m\" or \"N/h\" "
        "(or (N, timedelta)), not 'fast'.",
        "ALKQUEUE['QUEUES'] names a bad queue: invalid queue name 'bad name': use 1 to 100 "
        "characters of A-Z a-z 0-9 _ . : -, starting with a letter or digit.",
        "ALKQUEUE['QUEUES']['reports'] is 'sensitive'; expected a dict of queue options.",
    ]


def test_reading_the_settings_names_every_problem_in_one_error():
    message = refused({"MAX_PAYLOAD": 1, "QUEUES": {"a": {"concurrency": 0, "rate": "fast"}}})
    assert "Unknown ALKQUEUE setting(s) MAX_PAYLOAD" in message
    assert "['concurrency']: concurrency must be" in message and "not 'fast'" in message


def test_the_system_check_reports_an_unknown_key_as_e003():
    with override_settings(ALKQUEUE={"MAX_PAYLOAD": 10}):
        assert "alkqueue.E003" in _check_ids()


def test_a_bad_setting_does_not_also_crash_the_periodic_check():
    with override_settings(ALKQUEUE={"PERIODIC": "nightly"}):
        assert _check_ids() == ["alkqueue.E003"]


def test_the_system_check_reports_a_database_alias_missing_from_databases_as_e004():
    with override_settings(ALKQUEUE={"DATABASE": "nowhere"}):
        errors = [m for m in checks.run_checks(tags=["alkqueue"]) if m.id == "alkqueue.E004"]
    assert len(errors) == 1 and "'nowhere'" in errors[0].msg


def test_good_settings_pass_the_system_check():
    with override_settings(ALKQUEUE={"DATABASE": "other", "QUEUES": {"a": {"sensitive": True}}}):
        assert _check_ids() == []


def test_manage_py_check_reports_a_bad_setting_instead_of_crashing():
    from tests.workers import run_manage

    result = run_manage("check", env_extra={"DJANGO_SETTINGS_MODULE": "tests.bad_settings"})
    assert result.returncode != 0
    assert "alkqueue.E003" in result.stderr
    assert "CONSUMER_MODULES" in result.stderr and "Traceback" not in result.stderr


def test_an_int_beyond_floats_range_is_refused_as_a_bad_value():
    assert "ACK_WINDOW" in refused({"ACK_WINDOW": 10**400})
