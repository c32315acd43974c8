"""Payload rules: exactly what the standard `json` module round-trips, up to a size limit.

Payloads are stored as compact JSON text (not jsonb), so every accepted value comes back
equal to what went in, floats included.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .exceptions import PayloadError
from .validation import storable_text

JSONValue = Any


def encode(payload: JSONValue, *, max_bytes: int) -> str:
    """The stored text of `payload`; raises PayloadError naming the offending path."""
    _check(payload, "payload")
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise PayloadError(
            f"payload is {size} bytes encoded, over the limit of {max_bytes} "
            "(ALKQUEUE['MAX_PAYLOAD_BYTES'])"
        )
    return text


def decode(text: str) -> JSONValue:
    return json.loads(text)


def _check(value: object, path: str) -> None:
    # Exact types only: a subclass (an IntEnum, an OrderedDict) would come back as its base.
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise PayloadError(f"{path} is {value!r}: NaN and infinities are not JSON")
        return
    if kind is str:
        if not storable_text(value):  # type: ignore[arg-type]
            raise PayloadError(f"{path} is a str with a NUL character or an unpaired surrogate")
        return
    if kind is list:
        for index, item in enumerate(value):  # type: ignore[arg-type]
            _check(item, f"{path}[{index}]")
        return
    if kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise PayloadError(
                    f"{path} has a key {key!r} of type {type(key).__name__}: keys must be str"
                )
            _check(key, f"{path}[{key!r}]")
            _check(item, f"{path}[{key!r}]")
        return
    raise PayloadError(
        f"{path} is of type {kind.__name__}, which is not JSON "
        "(use dict, list, str, int, float, bool or None)"
    )
