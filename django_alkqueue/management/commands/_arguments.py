"""Argument types shared by the alk_* commands.

Each parses the text, then checks the value with the same rule the API uses
(validation.py), so `--poll-interval inf` or `--watch -1` is refused by argparse with a
message and exit status 2, never a traceback later.
"""

from __future__ import annotations

import argparse

from django.conf import settings

from django_alkqueue import validation
from django_alkqueue.exceptions import InvalidName, InvalidOption


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
