"""Argument types shared by the alk_* commands.

Each parses the text, then checks the value with the same rule the API uses
(validation.py), so `--poll-interval inf` or `--watch -1` is refused by argparse with a
message and exit status 2, never a traceback later.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from django.conf import settings

from django_alkqueue import limits as flow
from django_alkqueue import validation
from django_alkqueue.conf import get_settings
from django_alkqueue.exceptions import InvalidName, InvalidOption, PayloadError
from django_alkqueue.payload import decode, encode
from django_alkqueue.steps import check_name


def seconds(text: str) -> float:
    """A duration in seconds, 0 or more (validation.seconds: no NaN, no infinity)."""
    return _seconds(text, positive=False)


def positive_seconds(text: str) -> float:
    """A duration in seconds above 0 (validation.seconds: no NaN, no infinity)."""
    return _seconds(text, positive=True)


def positive_int(text: str) -> int:
    """A whole number of 1 or more."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {number}")
    return number


def positive_int_up_to(most: int) -> Callable[[str], int]:
    """A whole number from 1 to `most` (a number of more digits than `most` is refused as too
    large before int() is asked: it refuses those beyond 4,300 digits as not a number)."""

    def parse(text: str) -> int:
        digits = text.strip().lstrip("+")
        if digits.isdecimal() and len(digits) > len(str(most)):
            got = digits if len(digits) <= 20 else f"a number of {len(digits)} digits"
            raise argparse.ArgumentTypeError(f"must be at most {most}, got {got}")
        number = positive_int(text)
        if number > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, got {number}")
        return number

    return parse


def non_negative_int(text: str) -> int:
    """A whole number of 0 or more."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {number}")
    return number


def queue_name(text: str) -> str:
    """A valid queue name (validation.queue_name), so a typo is refused before the worker
    looks for its consumer."""
    try:
        return validation.queue_name(text)
    except InvalidName as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(text: str) -> float:
    """A duration in seconds, 0 or more: `90`, `90s`, `15m`, `2h`, `1d`."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: seconds, or a number with s, m, h or d (90, 15m, 2h)"
        )
    return seconds(str(float(match[1]) * _UNIT_SECONDS[match[2]]))


def job_id(text: str) -> int:
    """A job id: a whole number in the tables' range (validation.job_id)."""
    try:
        return validation.job_id(positive_int(text))
    except InvalidOption as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def signal_name(text: str) -> str:
    """A signal's name: the rules of a step's name (steps.check_name)."""
    try:
        return check_name(text)
    except InvalidOption as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def json_payload(text: str) -> object:
    """A JSON value storable as a payload is (payload.py: its rules and MAX_PAYLOAD_BYTES)."""
    try:
        value = decode(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    try:
        encode(value, max_bytes=get_settings().MAX_PAYLOAD_BYTES)
    except PayloadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def limit(name: str) -> Callable[[str], int | flow.Rate | None]:
    """One of flow control's limits as typed: a whole number for a cap, "N/s", "N/m" or
    "N/h" for a rate, "none" for no limit (limits.parse checks the value)."""

    def parse(text: str) -> int | flow.Rate | None:
        if text.strip().lower() == "none":
            return None
        value: object = text
        if name in ("concurrency", "key_concurrency"):
            value = positive_int_up_to(flow.MAX_LIMIT)(text)
        try:
            return flow.parse(name, value)
        except InvalidOption as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def database_alias(text: str) -> str:
    """An alias of settings.DATABASES (`--database nope` is one line, not a traceback)."""
    aliases = list(settings.DATABASES)
    if text not in aliases:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a database alias; settings.DATABASES has {', '.join(aliases)}"
        )
    return text


def _seconds(text: str, *, positive: bool) -> float:
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    try:
        return validation.seconds(number, "the value", positive=positive)
    except InvalidOption as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
