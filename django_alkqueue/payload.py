"""Payload rules: exactly what the standard `json` module round-trips, up to a size limit.

Payloads are stored as compact JSON text (not jsonb), so every accepted value comes back
equal to what went in, floats included. What goes to a jsonb column instead (a task's
arguments, a batch's callbacks) must also hold no NUL character, which jsonb refuses.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .exceptions import PayloadError
from .validation import shown, storable_copy

JSONValue = Any

#: The documented encoder with the options stored payloads are written with.
_PUBLIC_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
#: The same, without the circular-reference markers: encode() walks the value first (_plain),
#: and a cycle fails there, as a RecursionError.
_ENCODE = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
).encode
#: What json.loads(text) uses for a str, made once rather than looked up per call.
_DECODER = json.JSONDecoder()


def encode(payload: JSONValue, *, max_bytes: int, path: str = "payload") -> str:
    """The stored text of `payload`; raises PayloadError naming the offending path."""
    try:
        if not _plain(payload):
            raise _rejection(payload, path)
        text = _ENCODE(payload)
        # An ASCII text is its own UTF-8; otherwise the encoding also finds lone surrogates.
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate somewhere
        raise _rejection(payload, path) from None
    except RecursionError:
        raise PayloadError(f"{path} is nested too deeply to store") from None
    except PayloadError:
        raise
    except ValueError as exc:  # e.g. an int beyond Python's int-to-str digit limit
        raise PayloadError(f"{path} cannot be encoded as JSON: {exc}") from None
    if size > max_bytes:
        raise PayloadError(
            f"{path} is {size} bytes encoded, over the limit of {max_bytes} "
            "(ALKQUEUE['MAX_PAYLOAD_BYTES'])"
        )
    return text


def decode(text: str) -> JSONValue:
    """json.loads(text). A stored text is one compact document, with no whitespace around
    it, and for such a text the documented raw_decode() gives what json.loads does without
    its two whitespace scans, which cost more than decoding a small payload. Any other text
    goes the whole way, and fails as json.loads fails."""
    try:
        value, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError:
        end = -1
    if end == len(text):
        return value
    if text.startswith("\ufeff"):
        return json.loads(text)  # which refuses a byte order mark with its own message
    return _DECODER.decode(text)


def _plain(value: Any) -> bool:
    """Whether `value` is made of the exact JSON types only: the quick yes of the common case,
    without building a path per member. Strings are checked for lone surrogates by the UTF-8
    encoding of the whole text."""
    kind = type(value)
    if kind is dict:  # the usual payload: scalar members are checked here, without a call
        for key, member in value.items():
            if type(key) is not str:
                return False
            member_kind = type(member)
            if member_kind is str or member_kind is int or member_kind is bool or member is None:
                continue
            if not _plain(member):
                return False
        return True
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(map(_plain, value))
    return False


def _rejection(payload: JSONValue, path: str) -> PayloadError:
    """The error naming the first offending path (`_check` walks again, slowly)."""
    try:
        _check(payload, path)
    except PayloadError as exc:
        return exc
    return PayloadError(f"{path} cannot be encoded as UTF-8")


def _check(value: object, path: str) -> None:
    # Exact types only: a subclass (an IntEnum, an OrderedDict) would come back as its base.
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return
    if isinstance(value, float) and kind is float:
        if not math.isfinite(value):
            raise PayloadError(f"{path} is {value!r}: NaN and infinities are not JSON")
        return
    if isinstance(value, str) and kind is str:
        # NUL is fine (json escapes it); a lone surrogate has no UTF-8 form to store.
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise PayloadError(f"{path} is a str with an unpaired surrogate") from None
        return
    if isinstance(value, list) and kind is list:
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    if isinstance(value, dict) and kind is dict:
        for key, member in value.items():
            if type(key) is not str:
                raise PayloadError(
                    f"{path} has a key {shown(key, repr)} of type {type(key).__name__}: "
                    "keys must be str"
                )
            _check(key, f"{path}[{key!r}]")
            _check(member, f"{path}[{key!r}]")
        return
    raise PayloadError(
        f"{path} is of type {kind.__name__}, which is not JSON "
        "(use dict, list, str, int, float, bool or None)"
    )


def refuse_nul(value: JSONValue, path: str) -> None:
    """PayloadError naming the first string or key of `value` (plain JSON, checked already)
    that holds a NUL character: a jsonb column refuses it. The same on every database, so
    that what a project tests on SQLite also enqueues on PostgreSQL."""
    if isinstance(value, str):
        if "\x00" in value:
            raise PayloadError(f"{path} is a str with a NUL character, which jsonb cannot store")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            refuse_nul(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, member in value.items():
            if isinstance(key, str) and "\x00" in key:
                raise PayloadError(
                    f"{path} has a key {key!r} with a NUL character, which jsonb cannot store"
                )
            refuse_nul(member, f"{path}[{key!r}]")


def kept_value(value: JSONValue, path: str) -> JSONValue:
    """`value` (what Django's normalize_json made of a task's return value) as the library
    keeps it in a jsonb column: every string and key with its NUL characters and unpaired
    surrogates escaped (`storable_copy`); PayloadError for what strict JSON has no form for
    (NaN, infinities, an int past Python's int-to-str limit, a cycle)."""
    kept = _escaped(value)
    try:
        _PUBLIC_ENCODER.encode(kept)
    except (ValueError, TypeError, RecursionError) as exc:
        raise PayloadError(f"{path} cannot be stored as JSON: {exc}") from None
    return kept


def _escaped(value: JSONValue) -> JSONValue:
    if isinstance(value, str):
        return storable_copy(value)
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, dict):
        return {
            storable_copy(key) if isinstance(key, str) else key: _escaped(member)
            for key, member in value.items()
        }
    return value
