"""The rows of a PostgreSQL bulk enqueue, in a COPY format (dialect.py sends them).

Only the id and the payload differ from row to row, so the fields every row shares are
encoded once per call. The format is binary: the server then parses no numbers and no
timestamps, and the server's work was the slower side of a bulk enqueue. Naive datetimes
(USE_TZ = False) mean local time in the session's time zone, which the server resolves
itself; those calls use the text format and leave it to the server.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ...jobs import Stamps
from ..base import INSERT_FIELDS, insert_values

# Each field's binary form must be its column's type (models.QueueMessage), in INSERT_FIELDS
# order: queue, payload, priority, attempts, max_attempts, backoff_base, lease, retention,
# run_at, enqueued_at, expires_at, trace_context, unique_key.
_BINARY_TYPES = ("text", "text", "int2", "int4", "int4", "float8", "float8", "float8",
                 "timestamptz", "timestamptz", "timestamptz", "text", "text")  # fmt: skip
assert len(_BINARY_TYPES) == len(INSERT_FIELDS)

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)  # no flags, no extension
_TRAILER = struct.pack("!h", -1)
_NULL = struct.pack("!i", -1)
_ROW_START = struct.Struct("!hiq").pack  # the field count, then the id's length and value
_LENGTH = struct.Struct("!i").pack
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_PACK: dict[str, Any] = {
    "text": str.encode,
    "int2": struct.Struct("!h").pack,
    "int4": struct.Struct("!i").pack,
    "float8": struct.Struct("!d").pack,
    "timestamptz": lambda value: struct.pack("!q", (value - _PG_EPOCH) // _MICROSECOND),
}


class CopyRows:
    """One call's rows: `options` for the COPY statement, `header` to write first, `rows()`
    per chunk, `trailer` to write last."""

    def __init__(self, queue: str, stamps: Stamps) -> None:
        values = insert_values(queue, "", stamps)
        self.binary = all(
            value.tzinfo is not None for value in values if isinstance(value, datetime)
        )
        if self.binary:
            self.options, self.header, self.trailer = " (FORMAT BINARY)", _SIGNATURE, _TRAILER
            pairs = zip(_BINARY_TYPES, values, strict=True)
            fields = [_binary_field(kind, value) for kind, value in pairs]
            self._queue, self._same = fields[0], b"".join(fields[2:])
        else:
            self.options, self.header, self.trailer = "", b"", b""
            self._queue = _text_field(queue).encode()
            self._same = "\t".join(_text_field(value) for value in values[2:]).encode()

    def rows(self, ids: Sequence[int], texts: Sequence[str]) -> bytes:
        if self.binary:
            return self._binary_rows(ids, texts)
        return b"".join(
            b"%d\t%b\t%b\t%b\n" % (job_id, self._queue, _text_field(text).encode(), self._same)
            for job_id, text in zip(ids, texts, strict=True)
        )

    def _binary_rows(self, ids: Sequence[int], texts: Sequence[str]) -> bytes:
        parts: list[bytes] = []
        count = len(INSERT_FIELDS) + 1  # and the id
        for job_id, text in zip(ids, texts, strict=True):
            payload = text.encode()
            parts += (_ROW_START(count, 8, job_id), self._queue, _LENGTH(len(payload)), payload,
                      self._same)  # fmt: skip
        return b"".join(parts)


def _binary_field(kind: str, value: Any) -> bytes:
    if value is None:
        return _NULL
    data: bytes = _PACK[kind](value)
    return _LENGTH(len(data)) + data


def _text_field(value: Any) -> str:
    # COPY text format: \N is NULL; backslash, tab, newline and carriage return are escaped.
    if value is None:
        return "\\N"
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        text = text.translate(_TEXT_ESCAPES)
    return text


_TEXT_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
