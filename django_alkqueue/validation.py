"""The input rules: queue names, worker ids, durations, priorities, attempts, unique keys.

Every public entry point checks its input here before it touches the database, so bad input
raises one of our documented exceptions and writes nothing.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connections
from django.utils import timezone

from .exceptions import InvalidName, InvalidOption

QUEUE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
MAX_WORKER_ID_LENGTH = 255
MAX_UNIQUE_KEY_LENGTH = 255
PRIORITY_MIN, PRIORITY_MAX = -100, 100
MAX_ATTEMPTS_LIMIT = 2**31 - 1
#: No duration may exceed this; it keeps every computed timestamp far from datetime's limits.
MAX_DURATION = timedelta(days=365 * 100)

#: The smallest positive duration a timestamp can carry (datetime's resolution).
MIN_POSITIVE_SECONDS = 1e-6
#: One claim hands out at most this many jobs, whatever n asks for; also a batch consumer's
#: largest call.
MAX_CLAIM = 100_000
#: Job ids are bigint primary keys.
MAX_JOB_ID = 2**63 - 1

Duration = timedelta | int | float


#: An int longer than this many bits is named by its size in messages, not written out.
_SHOWN_BITS = 200


def shown(value: object, convert: Callable[[object], str] = str, limit: int = 200) -> str:
    """`convert(value)` cut to `limit` characters, for an error message. An int too long to
    print (Python refuses past 4,300 digits, with ValueError) is named by its size, and a
    value whose str() or repr() raises by its type: refusing a value must not raise
    something else."""
    if isinstance(value, int) and value.bit_length() > _SHOWN_BITS:
        return f"an int of about {int(value.bit_length() * 0.30103) + 1} digits"
    try:
        text = convert(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def queue_name(name: object) -> str:
    """1-100 chars of [A-Za-z0-9_.:-], starting with a letter or digit (so `_` names stay ours)."""
    if not isinstance(name, str):
        raise InvalidName(f"queue name must be a string, not {type(name).__name__}")
    if name.startswith("_"):
        raise InvalidName(f"queue name {name!r} is reserved: names starting with '_' are ours")
    if not QUEUE_NAME_RE.fullmatch(name):
        raise InvalidName(
            f"invalid queue name {name!r}: use 1 to 100 characters of A-Z a-z 0-9 _ . : -, "
            "starting with a letter or digit"
        )
    return name


def worker_id(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidName("worker_id must be a non-empty string")
    if len(value) > MAX_WORKER_ID_LENGTH:
        raise InvalidName(f"worker_id is longer than {MAX_WORKER_ID_LENGTH} characters")
    if not storable_text(value):
        raise InvalidName("worker_id contains a NUL character or an unpaired surrogate")
    return value


def storable_text(value: str) -> bool:
    """True when every database we support can store `value` verbatim in a text column."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_error_text(error: object) -> str | None:
    """Error text is diagnostic: make it storable rather than refuse it."""
    if error is None:
        return None
    try:
        text = str(error)
    except Exception:  # an error object whose str() fails still gets its job dead-lettered
        text = f"<{type(error).__name__} object: str() raised>"
    return storable_copy(text)


def storable_copy(text: str) -> str:
    """`text` with what no database can store escaped: a NUL as the four characters `\\x00`,
    an unpaired surrogate as `\\udcff` (Python's backslashreplace). For texts the library
    writes about a job (error texts, notes), which are kept rather than refused."""
    if storable_text(text):
        return text
    text = text.replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def seconds(value: object, option: str, *, positive: bool = False) -> float:
    """A duration as float seconds; refuses bools, negatives, NaN, infinities and huge values."""
    if isinstance(value, timedelta):
        result = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            result = float(value)
        except OverflowError:  # an int beyond any float
            raise InvalidOption(f"{option} must be at most {MAX_DURATION.days} days") from None
    else:
        raise InvalidOption(
            f"{option} must be a timedelta or a number of seconds, not {type(value).__name__}"
        )
    if math.isnan(result):
        raise InvalidOption(f"{option} must be a number of seconds, not NaN")
    if result < 0:
        raise InvalidOption(
            f"{option} must be {'positive' if positive else '>= 0'}, got {shown(value)}"
        )
    if positive and result < MIN_POSITIVE_SECONDS:
        # Below a microsecond a timedelta rounds to zero: the lease would lapse at once.
        raise InvalidOption(f"{option} must be at least 1 microsecond, got {shown(value)}")
    if result > MAX_DURATION.total_seconds():
        raise InvalidOption(
            f"{option} must be at most {MAX_DURATION.days} days, got {shown(value)}"
        )
    return result


def optional_seconds(value: object, option: str) -> float | None:
    return None if value is None else seconds(value, option)


def priority(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOption(f"priority must be an int, not {type(value).__name__}")
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidOption(
            f"priority must be in {PRIORITY_MIN}..{PRIORITY_MAX}, got {shown(value)}"
        )
    return value


def _int_in(value: object, option: str, low: int, high: int) -> int:
    """An int (not a bool) in low..high, or InvalidOption naming `option`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOption(f"{option} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidOption(f"{option} must be in {low}..{high}, got {shown(value)}")
    return value


def max_attempts(value: object) -> int:
    return _int_in(value, "max_attempts", 1, MAX_ATTEMPTS_LIMIT)


def unique_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidOption("unique_key must be a non-empty string or None")
    if len(value) > MAX_UNIQUE_KEY_LENGTH:
        raise InvalidOption(f"unique_key is longer than {MAX_UNIQUE_KEY_LENGTH} characters")
    if not storable_text(value):
        raise InvalidOption("unique_key contains a NUL character or an unpaired surrogate")
    return value


def _key(value: object, option: str) -> str:
    """A non-empty str of at most MAX_UNIQUE_KEY_LENGTH characters, storable as text."""
    if not isinstance(value, str) or not value:
        raise InvalidOption(f"{option} must be a non-empty string")
    if len(value) > MAX_UNIQUE_KEY_LENGTH:
        raise InvalidOption(f"{option} is longer than {MAX_UNIQUE_KEY_LENGTH} characters")
    if not storable_text(value):
        raise InvalidOption(f"{option} contains a NUL character or an unpaired surrogate")
    return value


class DebounceRule(NamedTuple):
    """An enqueue's debounce: its key, the quiet seconds, and the cap after the burst's first
    enqueue (None: none)."""

    key: str
    seconds: float
    max_seconds: float | None


def debounce(key: object, wait: object, most: object) -> DebounceRule | None:
    """debounce_key and debounce, both or neither; debounce_max only with them."""
    if key is None and wait is None:
        if most is not None:
            raise InvalidOption("debounce_max needs debounce_key and debounce")
        return None
    if key is None or wait is None:
        raise InvalidOption("debounce_key and debounce go together: give both or neither")
    return DebounceRule(
        _key(key, "debounce_key"),
        seconds(wait, "debounce", positive=True),
        None if most is None else seconds(most, "debounce_max", positive=True),
    )


def unique_for(value: object, key: str | None) -> float | None:
    """The seconds a unique key stays taken; only with a unique_key."""
    if value is None:
        return None
    if key is None:
        raise InvalidOption("unique_for needs a unique_key")
    return seconds(value, "unique_for", positive=True)


def concurrency_key(value: object) -> str | None:
    """What key_concurrency and key_rate count by: the rules of unique_key."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidOption("concurrency_key must be a non-empty string or None")
    if len(value) > MAX_UNIQUE_KEY_LENGTH:
        raise InvalidOption(f"concurrency_key is longer than {MAX_UNIQUE_KEY_LENGTH} characters")
    if not storable_text(value):
        raise InvalidOption("concurrency_key contains a NUL character or an unpaired surrogate")
    return value


def fair_key(value: object) -> str | None:
    """What the claim takes turns between (docs/fair-share.md): the rules of unique_key."""
    return None if value is None else _key(value, "fair_key")


#: A fair key's weight: the jobs it gets per round (docs/fair-share.md).
MAX_FAIR_WEIGHT = 1000


def fair_weight(value: object) -> int:
    """An int (not a bool) in 1..MAX_FAIR_WEIGHT."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOption(f"a fair weight must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_FAIR_WEIGHT:
        raise InvalidOption(f"a fair weight must be in 1..{MAX_FAIR_WEIGHT}, got {shown(value)}")
    return value


def run_at(value: object, now: datetime) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidOption(f"run_at must be a datetime, not {type(value).__name__}")
    if settings.USE_TZ and timezone.is_naive(value):
        raise InvalidOption("run_at must be timezone-aware")
    if not settings.USE_TZ and timezone.is_aware(value):
        raise InvalidOption("run_at must be naive when USE_TZ is False")
    if abs(value - now) > MAX_DURATION:
        raise InvalidOption(f"run_at must be within {MAX_DURATION.days} days of now")
    return value


def clock(value: object) -> Callable[[], datetime]:
    """A clock is called for the time; what it returns is checked by `clock_reading`."""
    if not callable(value):
        raise InvalidOption(
            f"clock must be a callable returning a datetime, not {shown(value, repr, 80)}"
        )
    return value


def clock_reading(value: object) -> datetime:
    """What a clock returned: a datetime, aware when USE_TZ is on and naive when it is off,
    like every timestamp the tables hold."""
    if not isinstance(value, datetime):
        raise InvalidOption(f"the clock returned {type(value).__name__}, not a datetime")
    # Every enqueue reads the clock: USE_TZ is looked up once, and the offset asked directly
    # (timezone.is_aware() asks for the same).
    aware = value.utcoffset() is not None
    if aware != settings.USE_TZ:
        if aware:
            raise InvalidOption("the clock returned an aware datetime; USE_TZ is False")
        raise InvalidOption("the clock returned a naive datetime; USE_TZ needs aware ones")
    return value


def rng(value: object) -> random.Random | None:
    if value is not None and not isinstance(value, random.Random):
        raise InvalidOption(f"rng must be a random.Random or None, not {type(value).__name__}")
    return value


def database_alias(value: object) -> str:
    """An alias of settings.DATABASES (checked without connecting)."""
    if not isinstance(value, str) or not value:
        raise InvalidOption(f"using must be a database alias, not {shown(value, repr, 80)}")
    if value not in connections:
        raise InvalidOption(
            f"using={value!r} is not a database alias; DATABASES has {', '.join(connections)}"
        )
    return value


def states(value: object, known: Iterable[str]) -> list[str]:
    """One state name, or an iterable of them (not a mapping, not bytes), each one known."""
    names = list(known)
    if isinstance(value, str):
        chosen = [value]
    elif isinstance(value, bytes | bytearray | dict) or not isinstance(value, Iterable):
        raise InvalidOption(
            f"states must be a state name or an iterable of them, not {type(value).__name__}"
        )
    else:
        chosen = list(value)
    unknown = [s for s in chosen if not isinstance(s, str) or s not in names]
    if unknown:
        listed = ", ".join(shown(state, repr, 40) for state in unknown[:5])
        raise InvalidOption(f"unknown state(s) {listed}; use {', '.join(names)}")
    return chosen


def batch_size(n: object) -> int:
    if not isinstance(n, int) or isinstance(n, bool):
        raise InvalidOption(f"n must be an int, not {type(n).__name__}")
    return n


def consumer_batch(value: object) -> int:
    """A batch consumer's most jobs per handler call: an int in 1..MAX_CLAIM."""
    return _int_in(value, "batch", 1, MAX_CLAIM)


def job_id(value: object) -> int:
    """A job id as the tables store it: an int in 1..2**63-1 (checked before any query, so a
    bad id cannot fail the statement and abort the caller's transaction)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOption(f"job id must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_JOB_ID:
        raise InvalidOption(f"job id must be in 1..{MAX_JOB_ID}, got {shown(value)}")
    return value
