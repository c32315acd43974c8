"""Hypothesis strategies for the bad-input properties (test_08_bad_input.py,
test_api_properties.py, test_hostile_values.py): valid values three times in four, so that
accepted calls get checked too, and for the rest everything a caller could pass by mistake or
malice, the hostile probe's of issue 48 included: lone surrogates, NUL characters, numbers
past what Python prints or float() holds, terminal escape codes."""

from __future__ import annotations

import decimal
import enum
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

NOW = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def property_settings(examples: int) -> settings:
    """The settings of every property here: `examples` examples, no deadline (the database
    sets the pace), and no complaint about slow, large or fixture-using examples."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )


class Color(enum.IntEnum):
    RED = 1


class Mapping(dict):  # type: ignore[type-arg]
    """A dict subclass: JSON can write it, but it would come back as a plain dict."""


def _power_of_ten(digits: int) -> int:
    """10**digits, made while drawing: Hypothesis prints a strategy's constants, and an int
    of more than 4,300 digits cannot be printed."""
    return 10**digits if digits > 0 else -(10**-digits)


#: Integers past what Python prints (int-to-str refuses more than 4,300 digits with
#: ValueError) or float() holds (OverflowError), and at the ends of 64 bits.
HUGE_INTS = st.one_of(
    st.sampled_from([10**400, -(10**400), 2**63, -(2**63) - 1]),
    st.sampled_from([5000, -5000]).map(_power_of_ten),
)
#: The same, and the floats that are no number or the largest one.
HUGE_NUMBERS = st.one_of(HUGE_INTS, st.sampled_from([1e308, math.inf, -math.inf, math.nan]))
# Integers of any size, beyond float's range and int-to-str's digit limit too.
ANY_INTS = st.one_of(st.integers(), st.integers(min_value=-(2**1100), max_value=2**1100), HUGE_INTS)
#: Text a terminal acts on: clear-screen and title escape sequences, a newline that fakes a
#: table row, a carriage return, a right-to-left override, C1's CSI, a backslash that would
#: fake an escape.
TERMINAL_ESCAPES = st.sampled_from(
    ["\x1b[2J", "\x1b]0;title\x07", "ok\nfake-row 1 2 3", "a\rb", "\u202eabc", "\x9b31m", "\\x1b"]
)
#: Text no database stores verbatim: NUL (PostgreSQL's text and jsonb refuse it) and lone
#: surrogates (no UTF-8 form; file names read from disk give them).
UNSTORABLE_TEXT = st.sampled_from(["\x00", "a\x00b", "\ud800", "file-\udcff.txt", "\udfff\x00"])
hostile_text = st.one_of(
    TERMINAL_ESCAPES, UNSTORABLE_TEXT, st.just("9" * 5000 + "/s"), st.just("9" * 5000)
)

any_text = st.one_of(
    st.text(max_size=40),  # NUL and other control characters included
    st.text(st.characters(categories=["Cs", "Cc", "Lo", "So"]), max_size=6),  # lone surrogates
    hostile_text,
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=20,
)
not_json = st.one_of(
    st.sampled_from(
        [
            math.nan,
            math.inf,
            -math.inf,
            Color.RED,
            b"bytes",
            (1, 2),
            {1, 2},
            decimal.Decimal("1.5"),
            NOW,
            object(),
        ]
    ),
    st.just(5000).map(lambda digits: 10**digits),  # beyond int-to-str's digit limit
    st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3),  # lone surrogates
    st.dictionaries(
        st.one_of(st.integers(), st.none(), st.booleans()), json_scalars, min_size=1, max_size=2
    ),  # keys that are not strings
    st.builds(Mapping, st.dictionaries(st.text(max_size=5), json_scalars, max_size=2)),
)
payloads = st.one_of(
    json_values,
    st.recursive(
        not_json,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3),
            st.dictionaries(st.text(max_size=5), inner, min_size=1, max_size=3),
        ),
        max_leaves=5,
    ),
)
anything = st.one_of(
    st.none(),
    st.booleans(),
    any_text,
    st.floats(),
    ANY_INTS,
    HUGE_NUMBERS,
    st.just(b"x"),
    st.just([]),
)


def mostly(valid: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Valid values three times in four, so that accepted calls get checked too."""
    return st.integers(0, 3).flatmap(lambda draw: bad if draw == 0 else valid)


queue_names = mostly(
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}", fullmatch=True),
    st.one_of(any_text, anything),
)
worker_ids = mostly(
    st.text(min_size=1, max_size=255),
    st.one_of(any_text, st.text(min_size=250, max_size=260), anything),
)
durations = mostly(
    st.one_of(
        st.floats(0, 3.15e9),
        st.integers(0, 10**6),
        st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=36500)),
    ),
    st.one_of(
        st.floats(),
        ANY_INTS,
        st.timedeltas(),
        anything,
        st.sampled_from([timedelta(days=36500, microseconds=1), -0.0, -1e-9]),
    ),
)
optional_durations = st.one_of(st.none(), durations)
priorities = mostly(st.integers(-100, 100), st.one_of(st.integers(), anything))
attempt_limits = mostly(st.integers(1, 2**31 - 1), st.one_of(st.integers(-3, 0), anything))
unique_keys = mostly(
    st.text(min_size=1, max_size=255),
    st.one_of(any_text, st.text(min_size=250, max_size=260), anything),
)
run_ats = mostly(
    st.datetimes(
        min_value=datetime(1935, 1, 1),
        max_value=datetime(2125, 1, 1),
        timezones=st.one_of(st.just(UTC), st.timezones()),
    ),
    st.one_of(
        st.datetimes(),
        st.datetimes(timezones=st.timezones()),
        anything,
        st.sampled_from(
            [
                datetime.max.replace(tzinfo=timezone(timedelta(hours=-14))),
                datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),
            ]
        ),
    ),
)
options = st.fixed_dictionaries(
    {},
    optional={
        "delay": optional_durations,
        "run_at": st.one_of(st.none(), run_ats),
        "expires": optional_durations,
        "max_attempts": st.one_of(st.none(), attempt_limits),
        "priority": st.one_of(st.none(), priorities),
        "unique_key": st.one_of(st.none(), unique_keys),
        "concurrency_key": st.one_of(st.none(), unique_keys),
    },
)
batch_sizes = mostly(st.integers(-2, 5), st.one_of(st.integers(), anything))
