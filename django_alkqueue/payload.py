"""Payload rules: exactly what the standard `json` module round-trips, up to a size limit.

Payloads are stored as compact JSON text (not jsonb), so every accepted value comes back
equal to what went in, floats included.
"""

from __future__ import annotations

import json
import json.encoder
import math
from collections.abc import Callable
from typing import Any

from .exceptions import PayloadError

JSONValue = Any

#: The documented encoder with the options stored payloads are written with.
_PUBLIC_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _compact_encoder() -> Callable[[JSONValue], str]:
    """The compact, non-ASCII-escaping, NaN-refusing JSON encoder, built once.

    The library's one use of a private name (tests/test_payload_encoder.py fails loudly
    should it change). JSONEncoder.encode builds CPython's C encoder anew on every call,
    which for a small payload costs more than the encoding; this builds it once, without
    the circular-reference markers (_plain has walked the value already). The public
    encoder costs enqueue_many more than the 10% the project allows such an exception
    (docs/benchmarks.md, "The driver's hot path"). Without the C accelerator, the public
    API."""
    make = json.encoder.c_make_encoder  # type: ignore[attr-defined]  # undocumented in typeshed
    if make is None:
        return _PUBLIC_ENCODER.encode
    iterencode = make(
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return lambda value: "".join(iterencode(value, 0))


def _not_json(value: object) -> None:
    raise TypeError(f"{type(value).__name__} is not JSON")


_ENCODE = _compact_encoder()
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
                    f"{path} has a key {key!r} of type {type(key).__name__}: keys must be str"
                )
            _check(key, f"{path}[{key!r}]")
            _check(member, f"{path}[{key!r}]")
        return
    raise PayloadError(
        f"{path} is of type {kind.__name__}, which is not JSON "
        "(use dict, list, str, int, float, bool or None)"
    )
