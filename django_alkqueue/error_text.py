"""Stored error text: its size cap, and its private form for sensitive queues.

A traceback's head names the exception and its tail the line that raised, so a text over
the cap loses its middle, where a marker says how much was cut. A sensitive queue's error
text (privacy.py) keeps the exception classes and the traceback's frames, and withholds the
messages, which often quote the payload.
"""

from __future__ import annotations

import traceback

from .defaults import LOGGED_ERROR_CHARS, MAX_ERROR_CHARS
from .outcomes import Fail, Retry


def capped(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """`text` itself when it fits in `limit` characters, else its head and tail around a
    marker, `limit` characters in all."""
    if len(text) <= limit:
        return text
    marker = ""
    for _ in range(3):  # the marker's length depends on the count it names: let it settle
        kept = max(limit - len(marker), 0)
        marker = f"\n\n[... {len(text) - kept:,} characters cut by django-alkqueue ...]\n\n"
    kept = max(limit - len(marker), 0)
    head = (kept + 1) // 2
    return (text[:head] + marker + text[len(text) - (kept - head) :])[:limit]


def capped_or_none(text: str | None) -> str | None:
    return None if text is None else capped(text)


def logged_line(text: str, limit: int = LOGGED_ERROR_CHARS) -> str:
    """The first line of an error text (its headline, `ExceptionClass: message`) cut at
    `limit` characters: what the worker's line for a job that did not succeed shows. A
    sensitive queue's text withholds the message already (private_error_text), so the line
    withholds it exactly as the stored text does."""
    lines = text.splitlines()
    return lines[0][:limit] if lines else ""


def headline(error: BaseException) -> str:
    """`ExceptionClass: message` with the bare class name (no module), or the class name
    alone when the message is empty: the first line the admin groups errors by."""
    name = type(error).__name__
    try:
        message = str(error)
    except Exception:  # a broken __str__ must not lose the job's outcome
        message = "<exception str() failed>"
    return f"{name}: {message}" if message else name


#: What stands for an exception's message in the error text of a sensitive queue's job.
WITHHELD = "(message withheld: the queue is sensitive)"


def private_error_text(error: BaseException) -> str:
    """The error text of a sensitive queue's job: the class names and the frames of the
    traceback, and no exception message, since a message may quote the payload (a KeyError
    names the key, a ValueError the value). Retry and Fail keep theirs: the handler wrote
    that reason for the record."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    parts = [
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_tb(exc.__traceback__))
        + _private_headline(exc)
        for exc in reversed(chain)
    ]
    return _private_headline(error) + "\n\n" + "\n\nThen:\n\n".join(parts)


def private_message(error: BaseException) -> str:
    """What a sensitive queue's record says for `error`'s message: the reason of a Retry or a
    Fail, `WITHHELD` for any other exception."""
    if isinstance(error, Retry | Fail):
        return str(error)
    return WITHHELD


def _private_headline(error: BaseException) -> str:
    if isinstance(error, Retry | Fail):
        return headline(error)
    return f"{type(error).__name__} {WITHHELD}"
